//! The hostile fixture plugin (tests/plugins/hostile) loaded into a runtime of its own, for the
//! sandbox tests that drive the runtime's API directly.

use std::path::Path;
use std::sync::Arc;

use factbuoy_runtime::ProgressObserver;
use factbuoy_runtime::failure::{LimitKind, PluginFailure};
use factbuoy_runtime::grants::GrantSet;
use factbuoy_runtime::params;
use factbuoy_runtime::sink::MemorySink;
use factbuoy_runtime::{
    Invocation, InvocationReport, Limits, LoadedPlugin, Runtime, RuntimeOptions,
};

/// A runtime with the hostile plugin loaded.
pub struct Hostile {
    /// The runtime, with the limits it was made with.
    pub runtime: Runtime,
    /// The plugin.
    pub plugin: LoadedPlugin,
}

impl Hostile {
    /// Loads the plugin into a runtime with `limits`, through the test binary's cache.
    pub async fn load(limits: Limits) -> Hostile {
        let runtime = Runtime::new(RuntimeOptions {
            limits,
            cache_dir: Some(super::cache_dir()),
        })
        .unwrap();
        let wasm = std::fs::read(super::fixture("hostile")).unwrap();
        let plugin = runtime.load("hostile", &wasm, None).await.unwrap();
        Hostile { runtime, plugin }
    }

    /// A request to run the plugin with `args` (`mode=...`) and `grants` (`read:/data`) below
    /// `root`, and the sink its artifacts will go to.
    pub fn request(
        &self,
        root: &Path,
        args: &[&str],
        grants: &[&str],
        observer: Option<Arc<dyn ProgressObserver>>,
    ) -> (Invocation, MemorySink) {
        let given: Vec<(String, String)> = args
            .iter()
            .map(|a| params::parse_assignment(a).unwrap())
            .collect();
        let params = params::resolve(&self.plugin.info.parameters, &given).unwrap();
        let sink = MemorySink::default();
        let request = Invocation {
            params,
            grants: GrantSet {
                granted: grants.iter().map(|g| g.parse().unwrap()).collect(),
                ..GrantSet::default()
            },
            host_root: root.to_owned(),
            sink: Arc::new(sink.clone()),
            observer,
            limits: None,
            stop: None,
        };
        (request, sink)
    }

    /// Runs the plugin as [`Hostile::request`] describes.
    pub async fn run(
        &self,
        root: &Path,
        args: &[&str],
        grants: &[&str],
        observer: Option<Arc<dyn ProgressObserver>>,
    ) -> (InvocationReport, MemorySink) {
        let (request, sink) = self.request(root, args, grants, observer);
        (self.runtime.invoke(&self.plugin, request).await, sink)
    }
}

/// The limit a failed run hit, if a limit ended it.
pub fn limit_of(report: &InvocationReport) -> Option<LimitKind> {
    match report.failure {
        Some(PluginFailure::LimitExceeded { limit, .. }) => Some(limit),
        _ => None,
    }
}
