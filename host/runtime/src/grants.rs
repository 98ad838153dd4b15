//! Capabilities: what a plugin asks for, what a run grants, and the intersection it gets.
//!
//! Deny by default. Written forms, used by `--grant` and `--deny` and in reports:
//! `host-info`, `read:/ABSOLUTE/PATH`, and `all` (with `--grant` only: everything the plugin asks
//! for). A read grant covers the paths below it; the plugin gets, for each path it asks for, the
//! narrower of what it asked and what was granted.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::bindings::{Capability, CapabilityRequest};

/// One capability in written form.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Grant {
    /// `host-info`: the facts the host reads about itself.
    HostInfo,
    /// A normalised absolute path: no `.`, `..`, empty components or trailing `/`.
    Read(String),
}

/// Why a capability, written or requested, was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GrantError {
    /// Not one of the written forms; holds the text.
    #[error("unknown capability {0:?}; write `host-info`, `read:/absolute/path` or `all`")]
    Unknown(String),
    /// A read path that is relative or has a `.` or `..` component; holds the path.
    #[error("capability path {0:?} must be absolute and must not contain `.` or `..`")]
    BadPath(String),
}

/// Normalises an absolute guest path, refusing relative paths and `.`/`..` components.
pub fn normalize_path(path: &str) -> Result<String, GrantError> {
    if !path.starts_with('/') {
        return Err(GrantError::BadPath(path.to_owned()));
    }
    let mut parts = Vec::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if part == "." || part == ".." {
            return Err(GrantError::BadPath(path.to_owned()));
        }
        parts.push(part);
    }
    Ok(format!("/{}", parts.join("/")))
}

/// Whether `path` is `base` or below it (both normalised).
pub fn is_within(path: &str, base: &str) -> bool {
    base == "/"
        || path == base
        || path
            .strip_prefix(base)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Grant {
    /// A capability as a plugin's description requests it, with its path normalised.
    pub fn from_request(capability: &Capability) -> Result<Self, GrantError> {
        Ok(match capability {
            Capability::HostInfo => Grant::HostInfo,
            Capability::ReadPath(path) => Grant::Read(normalize_path(path)?),
        })
    }
}

impl FromStr for Grant {
    type Err = GrantError;
    fn from_str(text: &str) -> Result<Self, GrantError> {
        match text {
            "host-info" => Ok(Grant::HostInfo),
            _ => match text.strip_prefix("read:") {
                Some(path) => Ok(Grant::Read(normalize_path(path)?)),
                None => Err(GrantError::Unknown(text.to_owned())),
            },
        }
    }
}

impl fmt::Display for Grant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::HostInfo => f.write_str("host-info"),
            Grant::Read(path) => write!(f, "read:{path}"),
        }
    }
}

/// What a run allows a plugin.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantSet {
    /// Grant everything the plugin asks for (`--grant all`, or a bundled plugin's default).
    pub everything_requested: bool,
    /// Granted one by one; a read path also grants everything below it.
    pub granted: BTreeSet<Grant>,
    /// Taken away after the above; a denied read path removes that path and everything below.
    pub denied: BTreeSet<Grant>,
}

/// What a plugin gets: the intersection of its requests and the grants.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Effective {
    /// Whether the plugin may call `host-info`.
    pub host_info: bool,
    /// Guest paths to preopen read-only, normalised, none below another.
    pub read_paths: Vec<String>,
    /// Required requests left ungranted, in written form.
    pub missing_required: Vec<String>,
}

impl GrantSet {
    /// Adds grants and denials in written form; `all` among the grants grants everything the
    /// plugin asks for.
    pub fn extend_written<G, D>(&mut self, grants: G, denies: D) -> Result<(), GrantError>
    where
        G: IntoIterator,
        G::Item: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        for text in grants {
            match text.as_ref() {
                "all" => self.everything_requested = true,
                other => {
                    self.granted.insert(other.parse()?);
                }
            }
        }
        for text in denies {
            self.denied.insert(text.as_ref().parse()?);
        }
        Ok(())
    }

    fn denies(&self, grant: &Grant) -> bool {
        self.denied.iter().any(|d| match (d, grant) {
            (Grant::HostInfo, Grant::HostInfo) => true,
            (Grant::Read(denied), Grant::Read(path)) => is_within(path, denied),
            _ => false,
        })
    }

    /// The part of `request` this set grants, if any.
    fn grant_for(&self, request: &Grant) -> Option<Grant> {
        if self.denies(request) {
            return None;
        }
        if self.everything_requested || self.granted.contains(request) {
            return Some(request.clone());
        }
        let Grant::Read(asked) = request else {
            return None;
        };
        // A grant above the asked path covers it; one below narrows it.
        self.granted.iter().find_map(|granted| match granted {
            Grant::Read(g) if is_within(asked, g) => Some(request.clone()),
            Grant::Read(g) if is_within(g, asked) && !self.denies(granted) => Some(granted.clone()),
            _ => None,
        })
    }

    /// What a plugin with these requests gets from this set; fails on a malformed request path.
    pub fn effective(&self, requests: &[CapabilityRequest]) -> Result<Effective, GrantError> {
        let mut effective = Effective::default();
        let mut paths = BTreeSet::new();
        for request in requests {
            let asked = Grant::from_request(&request.capability)?;
            match self.grant_for(&asked) {
                Some(Grant::HostInfo) => effective.host_info = true,
                Some(Grant::Read(path)) => {
                    paths.insert(path);
                }
                None if request.required => effective.missing_required.push(asked.to_string()),
                None => {}
            }
        }
        // Keep only the outermost paths: a preopen already covers what lies below it.
        let all: Vec<String> = paths.into_iter().collect();
        effective.read_paths = all
            .iter()
            .filter(|p| !all.iter().any(|q| q != *p && is_within(p, q)))
            .cloned()
            .collect();
        Ok(effective)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(capability: Capability, required: bool) -> CapabilityRequest {
        CapabilityRequest {
            capability,
            required,
            reason: String::new(),
        }
    }

    fn grants(granted: &[&str], denied: &[&str]) -> GrantSet {
        GrantSet {
            everything_requested: false,
            granted: granted.iter().map(|g| g.parse().unwrap()).collect(),
            denied: denied.iter().map(|g| g.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn parses_and_normalises_written_forms() {
        assert_eq!("host-info".parse::<Grant>().unwrap(), Grant::HostInfo);
        assert_eq!(
            "read://proc//".parse::<Grant>().unwrap(),
            Grant::Read("/proc".into())
        );
        assert_eq!(Grant::Read("/var/log".into()).to_string(), "read:/var/log");
        for bad in ["read:proc", "read:/a/../etc", "read:/./a", "network", "all"] {
            assert!(bad.parse::<Grant>().is_err(), "{bad}");
        }
    }

    #[test]
    fn written_grants_and_denials_extend_a_set() {
        let mut set = GrantSet::default();
        set.extend_written(["all", "read:/etc"], ["host-info"])
            .unwrap();
        assert!(set.everything_requested);
        assert_eq!(set.granted, [Grant::Read("/etc".into())].into());
        assert_eq!(set.denied, [Grant::HostInfo].into());
        assert!(set.extend_written(["network"], [] as [&str; 0]).is_err());
        assert!(set.extend_written([] as [&str; 0], ["all"]).is_err());
    }

    #[test]
    fn nothing_is_granted_by_default() {
        let requests = [
            request(Capability::HostInfo, true),
            request(Capability::ReadPath("/proc".into()), false),
        ];
        let effective = GrantSet::default().effective(&requests).unwrap();
        assert!(!effective.host_info);
        assert!(effective.read_paths.is_empty());
        assert_eq!(effective.missing_required, ["host-info"]);
    }

    #[test]
    fn the_plugin_gets_the_intersection() {
        let requests = [
            request(Capability::ReadPath("/var/log/journal".into()), true),
            request(Capability::ReadPath("/etc".into()), false),
            request(Capability::ReadPath("/sys".into()), false),
        ];
        // `/var/log` covers the asked `/var/log/journal`; `/etc/ssl` narrows the asked `/etc`;
        // `/sys` was not granted; host-info was granted but not asked for.
        let set = grants(&["read:/var/log", "read:/etc/ssl", "host-info"], &[]);
        let effective = set.effective(&requests).unwrap();
        assert_eq!(effective.read_paths, ["/etc/ssl", "/var/log/journal"]);
        assert!(!effective.host_info);
        assert!(effective.missing_required.is_empty());
    }

    #[test]
    fn deny_wins_over_grant_and_all() {
        let requests = [
            request(Capability::HostInfo, false),
            request(Capability::ReadPath("/proc".into()), true),
            request(Capability::ReadPath("/etc".into()), false),
        ];
        let mut set = grants(&[], &["read:/proc", "host-info"]);
        set.everything_requested = true;
        let effective = set.effective(&requests).unwrap();
        assert_eq!(effective.read_paths, ["/etc"]);
        assert!(!effective.host_info);
        assert_eq!(effective.missing_required, ["read:/proc"]);
    }

    #[test]
    fn nested_paths_collapse_to_the_outermost() {
        let requests = [
            request(Capability::ReadPath("/var/log".into()), false),
            request(Capability::ReadPath("/var/log/journal".into()), false),
            request(Capability::ReadPath("/var/logs".into()), false),
        ];
        let set = GrantSet {
            everything_requested: true,
            ..GrantSet::default()
        };
        let effective = set.effective(&requests).unwrap();
        assert_eq!(effective.read_paths, ["/var/log", "/var/logs"]);
    }
}
