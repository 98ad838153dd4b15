//! `filter`: which top-level facts to keep, with Ansible's fnmatch patterns.

use glob::{MatchOptions, Pattern};

/// No patterns (or `*`) keep everything. A pattern that does not start with `ansible_`,
/// `facter` or `ohai` also matches with `ansible_` put in front of it.
pub struct Filter {
    patterns: Vec<Pattern>,
}

const OPTIONS: MatchOptions = MatchOptions {
    case_sensitive: true,
    require_literal_separator: false,
    require_literal_leading_dot: false,
};

impl Filter {
    pub fn new(specs: &[String]) -> Result<Self, String> {
        let mut patterns = Vec::new();
        for spec in specs {
            // Python's fnmatch has no recursive wildcard: `**` is just `*` twice.
            let spec = spec.replace("**", "*");
            let mut add = |text: &str| {
                Pattern::new(text)
                    .map(|p| patterns.push(p))
                    .map_err(|e| format!("filter pattern {text:?} is not valid: {e}"))
            };
            add(&spec)?;
            if !spec.is_empty()
                && !["ansible_", "facter", "ohai"]
                    .iter()
                    .any(|p| spec.starts_with(p))
            {
                add(&format!("ansible_{spec}"))?;
            }
            if spec.is_empty() {
                add("*")?;
            }
        }
        Ok(Filter { patterns })
    }

    pub fn keeps(&self, name: &str) -> bool {
        self.patterns.is_empty() || self.patterns.iter().any(|p| p.matches_with(name, OPTIONS))
    }
}

#[cfg(test)]
mod tests {
    use super::Filter;

    fn filter(specs: &[&str]) -> Filter {
        Filter::new(&specs.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn fnmatch_with_the_ansible_prefix() {
        assert!(filter(&[]).keeps("anything"));
        assert!(filter(&["ansible_*_mb"]).keeps("ansible_memtotal_mb"));
        assert!(!filter(&["ansible_*_mb"]).keeps("ansible_hostname"));
        assert!(filter(&["eth[0-2]"]).keeps("ansible_eth1"));
        assert!(!filter(&["eth[0-2]"]).keeps("ansible_eth3"));
        assert!(filter(&["hostname", "kernel"]).keeps("ansible_kernel"));
        assert!(!filter(&["ansible_hostname"]).keeps("gather_subset"));
        assert!(filter(&[""]).keeps("gather_subset"));
        assert!(filter(&["ansible_**"]).keeps("ansible_lo"));
    }
}
