//! The contract versions this host runs: each supported line of compatible versions (0.1.x),
//! the bindings that serve it and the released versions, frozen in `wit/since_v<version>/`,
//! that it is tested against. The rules are in docs/wit-versioning.md.

use crate::bindings::CONTRACT_VERSION;

/// One line of contract versions that semver calls compatible (all 0.1.x, say), served by one
/// set of bindings: wasmtime links a plugin's `@0.1.0` imports and export to the bindings'
/// `@0.1.2` by semver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContractLine {
    /// The version the line's bindings were generated from: its newest.
    pub implements: &'static str,
    /// The line's released versions, oldest first, each frozen in `wit/since_v<version>/` and
    /// run by a fixture plugin built against it (`tests/plugins/contract-<version>`).
    pub frozen: &'static [&'static str],
}

/// Every line this host links, oldest first. A breaking 0.2 adds a line here, with its own
/// bindings module picked by the version a plugin exports (docs/wit-versioning.md).
pub const SUPPORTED: &[ContractLine] = &[ContractLine {
    implements: CONTRACT_VERSION,
    frozen: &["0.1.0", "0.1.1", "0.1.2"],
}];

impl ContractLine {
    /// The line as semver compatibility names it: `0.1` for 0.1.x, `1` for 1.x.y.
    pub fn name(&self) -> String {
        match compatibility(self.implements) {
            Some((0, minor)) => format!("0.{minor}"),
            Some((major, _)) => major.to_string(),
            None => unreachable!("SUPPORTED holds only well-formed versions (tested)"),
        }
    }
}

/// The supported line that runs a plugin built against contract `version`, if any. Within 0.x
/// the minor version is the breaking one, as in Cargo. A version newer than the line's bindings
/// (0.1.7 here, say) is let through: it is refused at link time, naming the import it needs
/// that this host lacks, and only if it uses one.
pub fn line_for(version: &str) -> Option<&'static ContractLine> {
    let wanted = compatibility(version)?;
    SUPPORTED
        .iter()
        .find(|line| compatibility(line.implements) == Some(wanted))
}

/// The supported versions for people: `factbuoy:plugin 0.1 (0.1.0, 0.1.1, 0.1.2)`.
pub fn supported_versions() -> String {
    SUPPORTED
        .iter()
        .map(|line| {
            format!(
                "factbuoy:plugin {} ({})",
                line.name(),
                line.frozen.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What semver compares for compatibility: `(0, minor)` for 0.x, `(major, 0)` otherwise.
fn compatibility(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.split(['.', '-', '+']);
    let major: u64 = parts.next()?.parse().ok()?;
    let minor: u64 = parts.next()?.parse().ok()?;
    Some(if major == 0 { (0, minor) } else { (major, 0) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_matched_to_a_line_as_cargo_semver_does() {
        let line = Some(&SUPPORTED[0]);
        assert_eq!(line_for("0.1.0"), line);
        assert_eq!(line_for("0.1.7"), line);
        assert_eq!(line_for("0.2.0"), None);
        assert_eq!(line_for("1.0.0"), None);
        assert_eq!(line_for("garbage"), None);
    }

    #[test]
    fn every_line_serves_its_frozen_versions_and_implements_one_at_least_as_new() {
        let triple = |v: &str| -> Vec<u64> { v.split('.').map(|n| n.parse().unwrap()).collect() };
        for line in SUPPORTED {
            for version in line.frozen {
                assert_eq!(line_for(version), Some(line), "{version}");
            }
            let frozen: Vec<_> = line.frozen.iter().map(|v| triple(v)).collect();
            assert!(frozen.is_sorted(), "{line:?}");
            assert!(
                frozen.iter().all(|v| *v <= triple(line.implements)),
                "{line:?}"
            );
        }
        assert_eq!(
            supported_versions(),
            "factbuoy:plugin 0.1 (0.1.0, 0.1.1, 0.1.2)"
        );
    }
}
