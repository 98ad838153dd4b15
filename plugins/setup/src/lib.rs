//! `setup`: the facts of Ansible's `setup` module on Linux (`ansible_facts`), gathered inside
//! the sandbox from read-only host files and the `host-info` interface, without Python.
//!
//! Collectors, `gather_subset` and `filter` follow Ansible's semantics; where Ansible runs a
//! program (`ip`, `lsb_release`, `capsh`, `systemctl`), the plugin reads what that program
//! reads. `tests/ansible/compare.py` checks the result against real Ansible on the same host.

mod collectors;
mod ctx;
mod filter;
mod subset;

use factbuoy_guest::hostfs::HostFs;
use factbuoy_guest::prelude::*;
use serde_json::{Map, Value};

use crate::ctx::{Ctx, ROOTS};

/// The artifact this plugin writes.
pub const ARTIFACT: &str = "ansible_facts.json";

struct Setup;

impl Gatherer for Setup {
    fn describe() -> Description {
        let mut description = Description::new(
            "setup",
            env!("CARGO_PKG_VERSION"),
            "Ansible's setup facts (ansible_facts) for this host, without Ansible or Python.",
        )
        .param(
            Param::string_list("gather_subset")
                .default("all")
                .describe(
                    "Which facts to gather, as Ansible's gather_subset: all, min, hardware, network, \
                     virtual, a collector or fact name, !name to exclude.",
                ),
        )
        .param(Param::string_list("filter").describe(
            "Only keep top-level facts matching one of these fnmatch patterns (ansible_ may be left out).",
        ))
        .capability(
            Capability::HostInfo,
            "architecture, IPv4 addresses, file system sizes and container markers",
        );
        for root in ROOTS {
            description = description.optional_capability(
                Capability::read(root),
                &format!("reads the host's {root}, as Ansible's setup module does"),
            );
        }
        description.writes(
            Artifact::facts(
                ARTIFACT,
                "the facts, keyed like Ansible's ansible_facts (ansible_hostname, ansible_mounts, ...)",
            )
            // Lists of objects by what identifies their items, so diffs match them; Ansible's
            // other lists hold strings and are compared as sets.
            .list_keys("ansible_mounts", &["mount"])
            .list_keys("*.ipv6", &["address"])
            .list_keys("*.ipv4_secondaries", &["address"]),
        )
    }

    fn gather(params: &Params) -> Result<(), GatherError> {
        let gather_subset: Vec<String> = params.string_list("gather_subset")?.to_vec();
        let filters: Vec<String> = params.string_list("filter")?.to_vec();
        let selected = subset::select(&gather_subset).map_err(GatherError::InvalidParameters)?;
        let filter = filter::Filter::new(&filters).map_err(GatherError::InvalidParameters)?;

        let mut ctx = Ctx::new(HostFs::new());
        let total = selected.len() as u64;
        for (done, collector) in selected.iter().enumerate() {
            progress::report(
                done as u64,
                total,
                &format!("collecting {}", collector.name),
            );
            (collector.collect)(&mut ctx);
        }
        progress::report(total, total, "collected");

        let mut facts = Map::new();
        for (name, value) in std::mem::take(&mut ctx.facts) {
            facts.insert(format!("ansible_{}", name.replace('-', "_")), value);
        }
        let subset_value = if gather_subset.is_empty() {
            vec!["all".to_owned()]
        } else {
            gather_subset
        };
        facts.insert("gather_subset".into(), subset_value.into());
        facts.insert("module_setup".into(), Value::Bool(true));
        facts.retain(|name, _| filter.keeps(name));
        output::write_json(ARTIFACT, &facts)
    }
}

export_gatherer!(Setup);
