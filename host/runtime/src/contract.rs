//! The contract versions this host runs: each supported line of compatible versions (0.1.x),
//! the bindings that serve it and the released versions, frozen in `wit/since_v<version>/`,
//! that it is tested against. The rules are in docs/wit-versioning.md.

use crate::bindings::{self, CONTRACT_VERSION};

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

/// Every line this host links, oldest first, each with bindings of its own picked by the
/// version a plugin exports (docs/wit-versioning.md): 0.1 through `bindings::v0_1`, 0.2
/// through the current bindings.
pub const SUPPORTED: &[ContractLine] = &[
    ContractLine {
        implements: "0.1.2",
        frozen: &["0.1.0", "0.1.1", "0.1.2"],
    },
    ContractLine {
        implements: CONTRACT_VERSION,
        frozen: &["0.2.0"],
    },
];

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

/// A linked plugin, ready to instantiate through the bindings of its contract line.
pub(crate) enum PluginPre<T: 'static> {
    /// Built against the current line (0.2).
    Current(bindings::GathererPre<T>),
    /// Built against 0.1.x: its description is translated ([`bindings::v0_1`]).
    V0_1(bindings::v0_1::GathererPre<T>),
}

impl<T: Send + 'static> PluginPre<T> {
    /// The component it instantiates.
    pub(crate) fn component(&self) -> &wasmtime::component::Component {
        match self {
            PluginPre::Current(pre) => pre.instance_pre().component(),
            PluginPre::V0_1(pre) => pre.instance_pre().component(),
        }
    }

    /// Instantiates the plugin and calls its `describe`, in the current line's types.
    pub(crate) async fn describe(
        &self,
        store: &mut wasmtime::Store<T>,
    ) -> wasmtime::Result<bindings::PluginInfo> {
        match self {
            PluginPre::Current(pre) => {
                let gatherer = pre.instantiate_async(&mut *store).await?;
                gatherer.factbuoy_plugin_plugin().call_describe(store).await
            }
            PluginPre::V0_1(pre) => {
                let gatherer = pre.instantiate_async(&mut *store).await?;
                let info = gatherer
                    .factbuoy_plugin_plugin()
                    .call_describe(store)
                    .await?;
                Ok(bindings::v0_1::plugin_info(info))
            }
        }
    }

    /// Instantiates the plugin and calls its `gather` with `params`.
    pub(crate) async fn gather(
        &self,
        store: &mut wasmtime::Store<T>,
        params: &[(String, bindings::ParamValue)],
    ) -> wasmtime::Result<Result<(), bindings::GatherError>> {
        match self {
            PluginPre::Current(pre) => {
                let gatherer = pre.instantiate_async(&mut *store).await?;
                gatherer
                    .factbuoy_plugin_plugin()
                    .call_gather(store, params)
                    .await
            }
            PluginPre::V0_1(pre) => {
                let gatherer = pre.instantiate_async(&mut *store).await?;
                let params = bindings::v0_1::params(params);
                let outcome = gatherer
                    .factbuoy_plugin_plugin()
                    .call_gather(store, &params)
                    .await?;
                Ok(outcome.map_err(bindings::v0_1::gather_error))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_are_matched_to_a_line_as_cargo_semver_does() {
        let (old, current) = (Some(&SUPPORTED[0]), Some(&SUPPORTED[1]));
        assert_eq!(line_for("0.1.0"), old);
        assert_eq!(line_for("0.1.7"), old);
        assert_eq!(line_for("0.2.0"), current);
        assert_eq!(line_for("0.2.3"), current);
        assert_eq!(line_for("0.3.0"), None);
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
            "factbuoy:plugin 0.1 (0.1.0, 0.1.1, 0.1.2), factbuoy:plugin 0.2 (0.2.0)"
        );
    }
}
