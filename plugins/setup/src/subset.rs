//! `gather_subset`: which collectors run, with Ansible's semantics.
//!
//! Every collector has a name and may answer to the names of the facts it sets (`kernel`
//! selects `platform`). `all` adds everything, `min` the minimal set, `!x` excludes `x` (and,
//! for a collector name, the facts it answers to), and the minimal set is always added unless
//! `!min` takes it away. A collector needed by another (pkg_mgr needs distribution) is added.

use std::collections::BTreeSet;

use crate::collectors::{COLLECTORS, Collector};

/// What Ansible's `setup` gathers even for `gather_subset: '!all'`.
pub const MINIMAL: &[&str] = &[
    "apparmor",
    "caps",
    "cmdline",
    "date_time",
    "distribution",
    "dns",
    "env",
    "fips",
    "local",
    "lsb",
    "pkg_mgr",
    "platform",
    "python",
    "selinux",
    "service_mgr",
    "ssh_pub_keys",
    "user",
];

/// Every name `gather_subset` accepts: collector names and the fact names they answer to.
pub fn valid_names() -> BTreeSet<&'static str> {
    COLLECTORS
        .iter()
        .flat_map(|c| std::iter::once(c.name).chain(c.fact_ids.iter().copied()))
        .collect()
}

/// The collectors to run, in an order where each runs after the ones it needs.
pub fn select(gather_subset: &[String]) -> Result<Vec<&'static Collector>, String> {
    let valid = valid_names();
    let minimal: BTreeSet<&str> = MINIMAL.iter().copied().collect();
    let all_but_minimal: BTreeSet<&str> = valid.difference(&minimal).copied().collect();
    let requested: Vec<&str> = if gather_subset.is_empty() {
        vec!["all"]
    } else {
        gather_subset.iter().map(|s| s.trim()).collect()
    };

    let mut added: BTreeSet<&str> = BTreeSet::new();
    let mut excluded: BTreeSet<&str> = BTreeSet::new();
    let mut explicitly_added: BTreeSet<&str> = BTreeSet::new();
    for subset in std::iter::once("min").chain(requested) {
        match subset {
            "min" => added.extend(&minimal),
            "all" => added.extend(&valid),
            "!min" => excluded.extend(&minimal),
            "!all" => excluded.extend(&all_but_minimal),
            _ => match subset.strip_prefix('!') {
                Some(name) => {
                    // Excluding an unknown name is ignored, as Ansible does.
                    if let Some(collector) = COLLECTORS.iter().find(|c| c.name == name) {
                        excluded.extend(collector.fact_ids);
                    }
                    if let Some(known) = valid.get(name) {
                        excluded.insert(known);
                    }
                }
                None => {
                    let Some(known) = valid.get(subset) else {
                        let allowed: Vec<&str> = valid.iter().copied().collect();
                        return Err(format!(
                            "Bad subset '{subset}' given to Ansible. gather_subset options allowed: all, {}",
                            allowed.join(", ")
                        ));
                    };
                    explicitly_added.insert(known);
                    added.insert(known);
                }
            },
        }
    }
    if added.is_empty() {
        added.extend(&valid);
    }
    for name in excluded.difference(&explicitly_added) {
        added.remove(name);
    }

    let mut chosen: BTreeSet<&str> = added
        .iter()
        .filter_map(|name| collector_for(name).map(|c| c.name))
        .collect();
    // Add what the chosen collectors need, until nothing new is needed.
    loop {
        let needed: BTreeSet<&str> = chosen
            .iter()
            .filter_map(|name| collector_for(name))
            .flat_map(|c| c.requires.iter().copied())
            .filter(|name| !chosen.contains(name))
            .collect();
        if needed.is_empty() {
            break;
        }
        chosen.extend(needed);
    }
    // COLLECTORS is listed in dependency order.
    Ok(COLLECTORS
        .iter()
        .filter(|c| chosen.contains(c.name))
        .collect())
}

/// The collector a subset name selects: the one of that name, or the one setting that fact.
fn collector_for(name: &str) -> Option<&'static Collector> {
    COLLECTORS
        .iter()
        .find(|c| c.name == name)
        .or_else(|| COLLECTORS.iter().find(|c| c.fact_ids.contains(&name)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(subset: &[&str]) -> Vec<&'static str> {
        let subset: Vec<String> = subset.iter().map(|s| s.to_string()).collect();
        select(&subset).unwrap().iter().map(|c| c.name).collect()
    }

    #[test]
    fn all_is_every_collector() {
        assert_eq!(names(&["all"]).len(), COLLECTORS.len());
        assert_eq!(names(&[]).len(), COLLECTORS.len());
    }

    #[test]
    fn not_all_keeps_the_minimal_set() {
        let mut expected: Vec<&str> = MINIMAL.to_vec();
        expected.sort();
        let mut got = names(&["!all"]);
        got.sort();
        assert_eq!(got, expected);
        assert_eq!(names(&["min"]).len(), MINIMAL.len());
    }

    #[test]
    fn dependencies_come_along_and_first() {
        assert_eq!(
            names(&["network", "!min"]),
            ["platform", "distribution", "network"]
        );
        assert_eq!(names(&["!all", "!min", "kernel"]), ["platform"]);
    }

    #[test]
    fn exclusions_and_unknown_names() {
        assert!(!names(&["all", "!hardware"]).contains(&"hardware"));
        assert!(names(&["all", "!nonexistent"]).contains(&"hardware"));
        let Err(e) = select(&["bogus".to_string()]) else {
            panic!("an unknown subset was accepted");
        };
        assert!(e.starts_with("Bad subset 'bogus' given to Ansible."), "{e}");
        // Excluding a collector also excludes the facts that would select it.
        assert!(!names(&["!all", "!virtual"]).contains(&"virtual"));
    }
}
