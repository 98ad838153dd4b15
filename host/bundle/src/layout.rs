//! Every path in a bundle, in one place. The aggregator assembles its results tree with these
//! names, the writer adds `meta/`, and readers look for them.
//!
//! ```text
//! meta/run.json                                   the run's configuration and versions
//! meta/status.json                                the final status document
//! meta/reports/<plugin>/<node>.json               each plugin run's report from its agent
//! meta/index.json                                 every other entry: path, size, sha256
//! plugins/<plugin>/definition.json                the plugin's description
//! plugins/<plugin>/results/<node>/...             its artifacts
//! plugins/<plugin>/errors/<node>/error.json       why there is no result
//! resources/                                      cluster resources (Kubernetes runs)
//! ```

pub use factbuoy_protocol::names::NODE_FILE_SUFFIX;

/// The run's configuration and versions.
pub const RUN: &str = "meta/run.json";
/// The final status document.
pub const STATUS: &str = "meta/status.json";
/// Every other entry with its size and sha-256; written last.
pub const INDEX: &str = "meta/index.json";
/// The file in a failed result's folder that says why it failed; plugins may not name an
/// artifact so ([`factbuoy_protocol::names::RESERVED_ARTIFACT_NAMES`]).
pub use factbuoy_protocol::names::ERROR_FILE;

/// Whether a result holds a plugin's artifacts or the reason it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    /// `plugins/<plugin>/results/<node>/`: the artifacts.
    Results,
    /// `plugins/<plugin>/errors/<node>/`: `error.json` and whatever the plugin wrote.
    Errors,
}

/// The folder of one plugin's result for one node (or `global`).
pub fn result_dir(plugin: &str, node: &str, kind: ResultKind) -> String {
    let kind = match kind {
        ResultKind::Results => "results",
        ResultKind::Errors => "errors",
    };
    format!("plugins/{plugin}/{kind}/{node}")
}

/// A file's path under a result folder split into `(plugin, kind, node, file)`, the inverse of
/// [`result_dir`]: `plugins/setup/results/n1/ansible_facts.json` gives
/// `("setup", "results", "n1", "ansible_facts.json")`. `kind` is `results` or `errors` in what
/// the aggregator writes, but any name in a bundle from elsewhere; `file` may hold further `/`.
pub fn result_parts(path: &str) -> Option<(&str, &str, &str, &str)> {
    let rest = path.strip_prefix("plugins/")?;
    let (plugin, rest) = rest.split_once('/')?;
    let (kind, rest) = rest.split_once('/')?;
    let (node, file) = rest.split_once('/')?;
    Some((plugin, kind, node, file))
}

/// A plugin's description.
pub fn definition(plugin: &str) -> String {
    format!("plugins/{plugin}/definition.json")
}

/// The report of one plugin run, as its agent sent it. The longest file name built from a node
/// name: [`NODE_FILE_SUFFIX`] sets the longest node name
/// ([`factbuoy_protocol::names::MAX_NODE_BYTES`]).
pub fn report(plugin: &str, node: &str) -> String {
    format!("meta/reports/{plugin}/{node}{NODE_FILE_SUFFIX}")
}

/// The bundle's file name for a run started at `created`.
pub fn file_name(run_id: &str, created: time::OffsetDateTime) -> String {
    let stamp = created
        .format(time::macros::format_description!(
            "[year][month][day][hour][minute][second]"
        ))
        .unwrap_or_default();
    format!("{stamp}_factbuoy_{run_id}.tar.gz")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_follow_sonobuoys_pattern() {
        let at = time::macros::datetime!(2026-11-20 22:05:09 UTC);
        assert_eq!(file_name("ab12", at), "20261120220509_factbuoy_ab12.tar.gz");
    }

    #[test]
    fn result_folders_follow_sonobuoys_layout() {
        assert_eq!(
            result_dir("setup", "n1", ResultKind::Results),
            "plugins/setup/results/n1"
        );
        assert_eq!(
            result_dir("setup", "global", ResultKind::Errors),
            "plugins/setup/errors/global"
        );
        assert_eq!(report("setup", "n1"), "meta/reports/setup/n1.json");
    }

    #[test]
    fn a_result_files_path_splits_back_into_its_parts() {
        let errors = format!("{}/{ERROR_FILE}", result_dir("p", "n1", ResultKind::Errors));
        assert_eq!(
            result_parts(&errors),
            Some(("p", "errors", "n1", ERROR_FILE))
        );
        assert_eq!(
            result_parts("plugins/p/results/global/sub/a.json"),
            Some(("p", "results", "global", "sub/a.json"))
        );
        for not_a_result in [RUN, "plugins/p/definition.json", "plugins/p/results/n1"] {
            assert_eq!(result_parts(not_a_result), None, "{not_a_result}");
        }
    }

    #[test]
    fn every_file_name_built_from_the_longest_names_fits() {
        use factbuoy_protocol::names::{MAX_FILE_NAME_BYTES, MAX_IDENTIFIER_BYTES, MAX_NODE_BYTES};
        let plugin = "p".repeat(MAX_IDENTIFIER_BYTES);
        let node = "n".repeat(MAX_NODE_BYTES);
        let paths = [
            result_dir(&plugin, &node, ResultKind::Results),
            result_dir(&plugin, &node, ResultKind::Errors),
            format!(
                "{}/{ERROR_FILE}",
                result_dir(&plugin, &node, ResultKind::Errors)
            ),
            definition(&plugin),
            report(&plugin, &node),
        ];
        for path in paths {
            for component in path.split('/') {
                assert!(component.len() <= MAX_FILE_NAME_BYTES, "{path}");
            }
        }
        assert_eq!(
            report(&plugin, &node).rsplit('/').next().unwrap().len(),
            MAX_FILE_NAME_BYTES
        );
    }
}
