//! The sandbox: loads gatherer components and invokes them with every limit enforced together.
//!
//! One [`Runtime`] per process shares one wasmtime engine. A plugin is compiled once (and cached
//! on disk), pre-linked once, described once, and then instantiated afresh for every invocation
//! (one execution of its `gather`; a collection *run* invokes each plugin once per node). What an
//! invocation may touch is the intersection of what the plugin asks for and what it is granted;
//! what it may consume is bounded by [`Limits`]. Whatever happens inside, [`Runtime::invoke`] returns a
//! [`InvocationReport`]: a plugin failing never fails the host.

pub mod bindings;
pub mod cache;
pub mod capture;
pub mod contract;
pub mod definition;
pub mod description;
pub mod engine;
pub mod failure;
pub mod fsguard;
pub mod grants;
mod instance;
pub mod interfaces;
pub mod limits;
pub mod params;
pub mod sink;
mod stop;
pub mod violation;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use bindings::{GathererPre, PLUGIN_EXPORT, ParamValue, PluginInfo};
use capture::{CaptureStream, Captured};
use contract::PluginPre;
use engine::Allocator;
use failure::PluginFailure;
use grants::{Effective, GrantSet};
pub use instance::output::ArtifactRecord;
use instance::output::OutputState;
use instance::progress::ProgressState;
pub use instance::progress::{Level, LogRecord, PluginProgress, ProgressObserver, level_name};
use instance::{Access, InstanceState};
pub use limits::Limits;
use sink::ArtifactSink;
pub use stop::StopSignal;
use violation::Violation;

/// How long `describe` may take; it must not touch the host, so this is generous.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(10);
/// Bytes of the end of stderr searched for a panic message.
const PANIC_SEARCH_BYTES: usize = capture::TAIL_BYTES;

/// Why a component could not be loaded. Each message names the plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The plugin's file could not be read.
    #[error("{plugin}: cannot read the plugin: {error}")]
    Read {
        /// The plugin's label (its path).
        plugin: String,
        /// Why.
        error: std::io::Error,
    },
    /// The bytes do not start with the wasm magic; holds the plugin's label.
    #[error("{0}: not a WebAssembly file")]
    NotWasm(String),
    /// A core module rather than a component; holds the plugin's label.
    #[error(
        "{0}: is a core WebAssembly module, not a component; build it with \
         `cargo build --target wasm32-wasip2`"
    )]
    CoreModule(String),
    /// wasmtime could not compile the component.
    #[error("{plugin}: failed to compile: {message}")]
    Compile {
        /// The plugin's label.
        plugin: String,
        /// wasmtime's error, with its whole chain.
        message: String,
    },
    /// A component that does not export the gatherer interface.
    #[error(
        "{plugin}: is not a factbuoy gatherer: it does not export `{PLUGIN_EXPORT}` \
         (its exports: {exports})"
    )]
    WrongWorld {
        /// The plugin's label.
        plugin: String,
        /// What it exports instead, comma-separated, or `none`.
        exports: String,
    },
    /// A gatherer built against a contract version this host cannot run.
    #[error(
        "{plugin}: was built against factbuoy:plugin@{found}, which this factbuoy does not \
         support: it supports {}; rebuild the plugin against one of them \
         (docs/wit-versioning.md)",
        contract::supported_versions()
    )]
    IncompatibleContract {
        /// The plugin's label.
        plugin: String,
        /// The contract version it was built against.
        found: String,
    },
    /// The component imports something this host does not provide.
    #[error("{plugin}: cannot be linked: {message}")]
    Link {
        /// The plugin's label.
        plugin: String,
        /// wasmtime's error, with its whole chain.
        message: String,
    },
    /// `describe` trapped, returned an error or ran past [`DESCRIBE_DEADLINE`].
    #[error("{plugin}: describe failed: {failure}")]
    Describe {
        /// The plugin's label.
        plugin: String,
        /// How it failed.
        failure: PluginFailure,
    },
    /// `describe` returned a description that [`description::problems`] refuses.
    #[error("{plugin}: describe returned an invalid description: {}", .problems.join("; "))]
    InvalidDescription {
        /// The plugin's label.
        plugin: String,
        /// One sentence per problem found.
        problems: Vec<String>,
    },
}

/// How the runtime is set up. `Default` gives the documented defaults.
#[derive(Debug, Clone)]
pub struct RuntimeOptions {
    /// The limits of every run that does not override them. Their stack size is engine-wide,
    /// and their memory size is the most any run may have.
    pub limits: Limits,
    /// Where compiled components are cached; `None` compiles on every load.
    pub cache_dir: Option<PathBuf>,
}

impl Default for RuntimeOptions {
    fn default() -> Self {
        RuntimeOptions {
            limits: Limits::default(),
            cache_dir: cache::default_dir(),
        }
    }
}

/// The shared engine, linker and cache.
pub struct Runtime {
    engine: Engine,
    allocator: Allocator,
    linker: Linker<InstanceState>,
    cache: cache::ComponentCache,
    limits: Limits,
    /// An empty, read-only directory mapped at `/` for runs that are not granted `/`, so that
    /// opening a path outside every grant reaches the host, which says which grant is missing
    /// ([`InvocationReport::ungranted_paths`]). `None` where no temporary directory could be made:
    /// such paths are then only "not found".
    ungranted_root: Option<tempfile::TempDir>,
}

/// A plugin ready to run: compiled, linked and described.
pub struct LoadedPlugin {
    /// Where it came from, for messages: a bundled name or a file path.
    pub label: String,
    /// What the plugin's `describe` returned, checked.
    pub info: PluginInfo,
    pre: PluginPre<InstanceState>,
}

/// One invocation of a plugin: what it is given and granted.
pub struct Invocation {
    /// Parameters already resolved against the plugin's description.
    pub params: Vec<(String, ParamValue)>,
    /// What the run grants; the plugin gets the intersection with what it asks for.
    pub grants: GrantSet,
    /// The host directory that granted guest paths are mapped onto (`/`, or `/host` in a pod).
    pub host_root: PathBuf,
    /// Where the plugin's artifacts go.
    pub sink: Arc<dyn ArtifactSink>,
    /// Told of progress and logs as they happen; `None` when no one is watching.
    pub observer: Option<Arc<dyn ProgressObserver>>,
    /// Overrides the runtime's limits for this run. The stack limit is engine-wide and stays;
    /// the memory limit can only be lowered.
    pub limits: Option<Limits>,
    /// Stops the invocation before it finishes when given (its run is interrupted); `None`: it
    /// runs to its end or its deadline.
    pub stop: Option<StopSignal>,
}

/// What happened in one invocation.
#[derive(Debug, Clone, serde::Serialize)]
pub struct InvocationReport {
    /// The plugin's name, as its description gives it.
    pub plugin: String,
    /// The plugin's own version, as its description gives it.
    pub version: String,
    /// Where the plugin came from: the [`LoadedPlugin::label`].
    pub source: String,
    /// Whether the run ended without a failure.
    pub succeeded: bool,
    /// Why the run failed; `None` when it succeeded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure: Option<PluginFailure>,
    /// What the run could reach: what the plugin asked for, limited to what was granted.
    pub granted: Effective,
    /// Granted paths that do not exist below the host root, so nothing was mapped there.
    pub absent_paths: Vec<String>,
    /// Paths the plugin tried to open that no grant covers (the first 16, normalised); each
    /// has a warning naming the `--grant` that allows it. The plugin saw "permission denied".
    pub ungranted_paths: Vec<String>,
    /// Every artifact the plugin created, in the order it created them.
    pub artifacts: Vec<ArtifactRecord>,
    /// The latest progress report that carried counters or a message, without its warnings and
    /// errors (those are in `warnings` and `errors`).
    pub progress: Option<PluginProgress>,
    /// The warnings the plugin reported, within the recording budget, and the host's own (a
    /// granted path it could not map).
    pub warnings: Vec<String>,
    /// The errors the plugin reported, within the recording budget.
    pub errors: Vec<String>,
    /// The plugin's log records, within the recording budget.
    pub logs: Vec<LogRecord>,
    /// Log records and warnings dropped because the recording budget was spent.
    pub dropped_records: u64,
    /// What the plugin wrote to stdout, within the capture limit.
    pub stdout: Captured,
    /// What the plugin wrote to stderr, within the capture limit.
    pub stderr: Captured,
    /// Wall-clock time of the run, in milliseconds; 0 when it ended before the plugin started
    /// (a capability missing).
    pub duration_ms: f64,
}

impl InvocationReport {
    /// One line for people: `plugin "x" 0.1.0: <what went wrong>`.
    pub fn failure_line(&self) -> Option<String> {
        self.failure
            .as_ref()
            .map(|f| format!("plugin {:?} {}: {f}", self.plugin, self.version))
    }
}

impl Runtime {
    /// Builds the engine (pooling allocation where the address space allows), the linker with
    /// WASI and the factbuoy interfaces, and the component cache; starts the epoch ticker.
    pub fn new(options: RuntimeOptions) -> anyhow::Result<Self> {
        let (engine, allocator) = engine::build(&options.limits).map_err(wasm_error)?;
        engine::start_epoch_ticker(&engine);
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm_error)?;
        interfaces::wasi_filesystem::add_to_linker(&mut linker).map_err(wasm_error)?;
        bindings::Gatherer::add_to_linker::<_, wasmtime::component::HasSelf<InstanceState>>(
            &mut linker,
            |state| state,
        )
        .map_err(wasm_error)?;
        bindings::v0_1::Gatherer::add_to_linker::<_, wasmtime::component::HasSelf<InstanceState>>(
            &mut linker,
            |state| state,
        )
        .map_err(wasm_error)?;
        let cache = cache::ComponentCache::new(&engine, options.cache_dir);
        Ok(Runtime {
            engine,
            allocator,
            linker,
            cache,
            limits: options.limits,
            ungranted_root: empty_directory()
                .inspect_err(|e| {
                    tracing::debug!("no empty directory to map at / for ungranted paths: {e}")
                })
                .ok(),
        })
    }

    /// How the engine allocates instances: pooling, or on demand when the pool did not fit.
    pub fn allocator(&self) -> Allocator {
        self.allocator
    }

    /// The cache of compiled components.
    pub fn cache(&self) -> &cache::ComponentCache {
        &self.cache
    }

    /// The limits an invocation gets when it does not override them.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Loads the component in the file at `path` as [`Runtime::load`] does. A file loaded
    /// before and unchanged since is neither read nor hashed when its compiled code is cached
    /// (see [`cache`]).
    pub async fn load_file(&self, path: &Path) -> Result<LoadedPlugin, LoadError> {
        let label = path.display().to_string();
        let read_error = |source| LoadError::Read {
            plugin: label.clone(),
            error: source,
        };
        let metadata = std::fs::metadata(path).map_err(read_error)?;
        if let Some(component) = self
            .cache
            .known_digest(path, &metadata)
            .and_then(|sha256| self.cache.cached(&self.engine, &sha256))
        {
            return self.link_and_describe(&label, component).await;
        }
        let wasm = std::fs::read(path).map_err(read_error)?;
        let sha256 = factbuoy_protocol::digest::sha256_hex(&wasm);
        let loaded = self.load(&label, &wasm, Some(&sha256)).await?;
        // Only if the file did not change while it was read: then the digest is of what the
        // metadata describes.
        if std::fs::metadata(path)
            .is_ok_and(|after| cache::file_identity(&after) == cache::file_identity(&metadata))
        {
            self.cache.remember_digest(path, &metadata, &sha256);
        }
        Ok(loaded)
    }

    /// Compiles (or loads from the cache), checks, links and describes a component.
    /// `sha256` is the wasm's digest when already known (bundled plugins), saving a hash.
    pub async fn load(
        &self,
        label: &str,
        wasm: &[u8],
        sha256: Option<&str>,
    ) -> Result<LoadedPlugin, LoadError> {
        let digest = match sha256 {
            Some(digest) => digest.to_owned(),
            None => factbuoy_protocol::digest::sha256_hex(wasm),
        };
        let component = self.compile(label, wasm, &digest).await?;
        let loaded = self.link_and_describe(label, component).await?;
        let info = &loaded.info;
        self.cache
            .name_entry(&digest, &format!("{} {}", info.name, info.version));
        Ok(loaded)
    }

    async fn link_and_describe(
        &self,
        label: &str,
        component: Component,
    ) -> Result<LoadedPlugin, LoadError> {
        let line = self.check_world(label, &component)?;
        let link_error = |e: wasmtime::Error| LoadError::Link {
            plugin: label.to_owned(),
            message: format!("{e:#}"),
        };
        let instance_pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(link_error)?;
        let pre = if line.implements == bindings::CONTRACT_VERSION {
            PluginPre::Current(GathererPre::new(instance_pre).map_err(link_error)?)
        } else {
            PluginPre::V0_1(bindings::v0_1::GathererPre::new(instance_pre).map_err(link_error)?)
        };
        let info = self.describe(label, &pre).await?;
        let problems = description::problems(&info);
        if !problems.is_empty() {
            return Err(LoadError::InvalidDescription {
                plugin: label.to_owned(),
                problems,
            });
        }
        Ok(LoadedPlugin {
            label: label.to_owned(),
            info,
            pre,
        })
    }

    async fn compile(
        &self,
        label: &str,
        wasm: &[u8],
        digest: &str,
    ) -> Result<Component, LoadError> {
        if !wasm.starts_with(b"\0asm") {
            return Err(LoadError::NotWasm(label.to_owned()));
        }
        if !wasmtime::wasmparser::Parser::is_component(wasm) {
            return Err(LoadError::CoreModule(label.to_owned()));
        }
        let compile_error = |message: String| LoadError::Compile {
            plugin: label.to_owned(),
            message,
        };
        // A hit maps the cached code: no copy of the wasm, which is 19 MB for a Python plugin.
        if let Some(component) = self.cache.cached(&self.engine, digest) {
            return Ok(component);
        }
        // Compiling takes seconds of CPU, minutes on a slow node or in a debug build: off the
        // async threads, so that an agent's heartbeats, uploads and progress go on meanwhile.
        let (cache, engine, wasm) = (self.cache.clone(), self.engine.clone(), wasm.to_vec());
        let digest = digest.to_owned();
        tokio::task::spawn_blocking(move || cache.compile(&engine, &wasm, &digest))
            .await
            .map_err(|e| compile_error(e.to_string()))?
            .map_err(|e| compile_error(format!("{e:#}")))
    }

    /// Tells a component of another world, or of an incompatible contract version, from a
    /// gatherer, before linking produces a less readable error; a gatherer's contract line
    /// picks the bindings it is called through.
    fn check_world(
        &self,
        label: &str,
        component: &Component,
    ) -> Result<&'static contract::ContractLine, LoadError> {
        let ty = component.component_type();
        let exports: Vec<String> = ty
            .exports(&self.engine)
            .map(|(name, _)| name.to_owned())
            .collect();
        let prefix = format!("{PLUGIN_EXPORT}@");
        let Some(version) = exports.iter().find_map(|name| name.strip_prefix(&prefix)) else {
            return Err(LoadError::WrongWorld {
                plugin: label.to_owned(),
                exports: if exports.is_empty() {
                    "none".to_owned()
                } else {
                    exports.join(", ")
                },
            });
        };
        contract::line_for(version).ok_or_else(|| LoadError::IncompatibleContract {
            plugin: label.to_owned(),
            found: version.to_owned(),
        })
    }

    async fn describe(
        &self,
        label: &str,
        pre: &PluginPre<InstanceState>,
    ) -> Result<PluginInfo, LoadError> {
        let limits = Limits {
            deadline: DESCRIBE_DEADLINE.min(self.limits.deadline),
            ..self.limits.clone()
        };
        let describe_error = |failure| LoadError::Describe {
            plugin: label.to_owned(),
            failure,
        };
        let sink: Arc<dyn ArtifactSink> = Arc::new(sink::MemorySink::default());
        let mut store = self.new_store(
            label,
            wasi_builder(),
            limits,
            Access::none(),
            (sink, None),
            None,
        );
        let deadline = store.data().limits.deadline;
        let call = pre.describe(&mut store);
        match tokio::time::timeout(deadline, call).await {
            // The description is kept for as long as the plugin is loaded: it counts against
            // the same metadata budget as a run's records.
            Ok(Ok(info)) => match store
                .data_mut()
                .charge_metadata(description::text_bytes(&info))
            {
                Ok(()) => Ok(info),
                Err(violation) => Err(describe_error(violation.into())),
            },
            Ok(Err(e)) => {
                let stderr = store.data().stderr.last_text(PANIC_SEARCH_BYTES);
                Err(describe_error(failure::classify_trap(
                    &e,
                    &stderr,
                    self.limits.stack_bytes,
                )))
            }
            Err(_) => Err(describe_error(Violation::Deadline(deadline).into())),
        }
    }

    fn new_store(
        &self,
        plugin: &str,
        mut wasi: WasiCtxBuilder,
        limits: Limits,
        access: Access,
        (sink, observer): (Arc<dyn ArtifactSink>, Option<Arc<dyn ProgressObserver>>),
        stop: Option<StopSignal>,
    ) -> Store<InstanceState> {
        let stdout = CaptureStream::new(limits.captured_stdio_bytes);
        let stderr = CaptureStream::new(limits.captured_stdio_bytes);
        // Deny by default: no arguments, no network, no stdin; the environment only as `run`
        // passes it (`PASSED_ENVIRONMENT`).
        wasi.stdout(stdout.clone())
            .stderr(stderr.clone())
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false);
        let state = InstanceState {
            wasi: wasi.build(),
            table: wasmtime::component::ResourceTable::new(),
            host_info_granted: access.host_info,
            host_root: access.host_root,
            read_paths: access.read_paths,
            fs_guard: Default::default(),
            deadline_at: Instant::now() + limits.deadline,
            output: OutputState::new(sink),
            progress: ProgressState::new(observer),
            stdout,
            stderr,
            violation: None,
            plugin: Arc::from(plugin),
            metadata_spent: 0,
            limits,
        };
        let mut store = Store::new(&self.engine, state);
        store.limiter(|state| state);
        let started = Instant::now();
        let deadline = store.data().limits.deadline;
        // Every tick: yield to other tasks, and end the plugin once its deadline has passed or
        // its run was interrupted.
        store.epoch_deadline_callback(move |mut ctx| {
            if started.elapsed() >= deadline {
                return Err(ctx.data_mut().violate(Violation::Deadline(deadline)));
            }
            if stop.as_ref().is_some_and(StopSignal::is_stopped) {
                return Err(ctx.data_mut().violate(Violation::Stopped));
            }
            Ok(UpdateDeadline::Yield(1))
        });
        store.set_epoch_deadline(1);
        store
    }

    /// Invokes a loaded plugin once. Never fails: every problem ends up in the report.
    pub async fn invoke(&self, plugin: &LoadedPlugin, invocation: Invocation) -> InvocationReport {
        let started = Instant::now();
        let mut limits = invocation.limits.unwrap_or_else(|| self.limits.clone());
        // The engine's memory slots are sized for the runtime's limit: above it, growth would
        // fail in the allocator before the limiter could report it by name.
        limits.memory_bytes = limits.memory_bytes.min(self.limits.memory_bytes);
        let info = &plugin.info;
        let mut report = InvocationReport {
            plugin: info.name.clone(),
            version: info.version.clone(),
            source: plugin.label.clone(),
            succeeded: false,
            failure: None,
            granted: Effective::default(),
            absent_paths: Vec::new(),
            ungranted_paths: Vec::new(),
            artifacts: Vec::new(),
            progress: None,
            warnings: Vec::new(),
            errors: Vec::new(),
            logs: Vec::new(),
            dropped_records: 0,
            stdout: Captured::default(),
            stderr: Captured::default(),
            duration_ms: 0.0,
        };
        let effective = match invocation.grants.effective(&info.capabilities) {
            Ok(effective) => effective,
            Err(e) => {
                report.failure = Some(PluginFailure::Failed {
                    message: e.to_string(),
                });
                return report;
            }
        };
        report.granted = effective.clone();
        if !effective.missing_required.is_empty() {
            report.failure = Some(PluginFailure::MissingCapabilities {
                plugin: info.name.clone(),
                missing: effective.missing_required,
            });
            return report;
        }

        let mut wasi = wasi_builder();
        wasi.envs(&passed_environment(std::env::vars_os()));
        let mut mapped = Vec::new();
        let mut guard = fsguard::FsGuard::default();
        for guest_path in &effective.read_paths {
            let host_path = host_path(&invocation.host_root, guest_path);
            if !host_path.is_dir() {
                report.absent_paths.push(guest_path.clone());
                continue;
            }
            // A grant is a path the plugin opens too: `read:/proc/1/fd` maps nothing.
            let checked = std::fs::File::open(&host_path)
                .map_err(fsguard::PathRefusal::from)
                .and_then(|dir| guard.check(&dir, fsguard::ProcUse::Open));
            if let Err(refusal) = checked {
                report.warnings.push(format!(
                    "did not map {guest_path} from {}: {refusal}",
                    host_path.display()
                ));
                continue;
            }
            match wasi.preopened_dir(&host_path, guest_path, FsPerms::ReadOnly) {
                Ok(_) => mapped.push(guest_path.clone()),
                Err(e) => report.warnings.push(format!(
                    "could not map {guest_path} from {}: {e:#}",
                    host_path.display()
                )),
            }
        }
        // Paths outside every grant lead to an empty directory, where the host sees them.
        let ungranted_root = self
            .ungranted_root
            .as_ref()
            .filter(|_| !mapped.iter().any(|p| p == "/"))
            .and_then(|dir| {
                wasi.preopened_dir(dir.path(), "/", FsPerms::ReadOnly)
                    .ok()?;
                std::fs::File::open(dir.path()).ok()
            });
        let deadline = limits.deadline;
        let stack_bytes = self.limits.stack_bytes;
        let mut store = self.new_store(
            &info.name,
            wasi,
            limits,
            Access {
                host_info: effective.host_info,
                host_root: invocation.host_root,
                read_paths: mapped,
            },
            (invocation.sink, invocation.observer),
            invocation.stop.clone(),
        );
        if let Some(dir) = &ungranted_root
            && let Err(e) = store
                .data_mut()
                .fs_guard
                .watch_ungranted_root(dir, &report.absent_paths)
        {
            tracing::debug!("cannot watch the empty directory mapped at /: {e}");
        }
        let call = plugin.pre.gather(&mut store, &invocation.params);
        // The epoch callback ends a plugin that computes past its deadline or is stopped; this
        // ends one that is stuck in a host call.
        let stop = invocation.stop;
        let stopped = async {
            match &stop {
                Some(stop) => stop.stopped().await,
                None => std::future::pending().await,
            }
        };
        let outcome = tokio::select! {
            outcome = tokio::time::timeout(deadline, call) => outcome.map_err(|_| Violation::Deadline(deadline)),
            () = stopped => Err(Violation::Stopped),
        };
        let state = store.data_mut();
        state.output.finish_all().await;
        let stderr_tail = state.stderr.last_text(PANIC_SEARCH_BYTES);
        let failure = match outcome {
            Err(violation) => {
                state.violation.get_or_insert(violation);
                None
            }
            Ok(Err(e)) => Some(failure::classify_trap(&e, &stderr_tail, stack_bytes)),
            Ok(Ok(Err(gather_error))) => {
                Some(failure::bounded(gather_error, state.limits.host_call_bytes).into())
            }
            Ok(Ok(Ok(()))) => None,
        };
        // A limit the plugin was told about through a WIT error (the output limit) decides the
        // failure even if the plugin went on and returned normally.
        report.failure = match state.violation.clone() {
            Some(violation) => Some(PluginFailure::from(violation).for_plugin(&info.name)),
            None => failure,
        };
        report.succeeded = report.failure.is_none();
        report.artifacts = std::mem::take(&mut state.output.records);
        report.progress = state.progress.latest.take();
        report.warnings.append(&mut state.progress.warnings);
        report.ungranted_paths = std::mem::take(&mut state.fs_guard.ungranted)
            .into_iter()
            .collect();
        for path in &report.ungranted_paths {
            report.warnings.push(ungranted_warning(info, path));
        }
        report.errors = std::mem::take(&mut state.progress.errors);
        report.logs = std::mem::take(&mut state.progress.logs);
        report.dropped_records = state.progress.dropped;
        report.stdout = state.stdout.snapshot();
        report.stderr = state.stderr.snapshot();
        report.duration_ms = started.elapsed().as_secs_f64() * 1e3;
        report
    }
}

/// A new empty directory, read-only even to its owner.
fn empty_directory() -> std::io::Result<tempfile::TempDir> {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new()
        .prefix("factbuoy-ungranted-")
        .tempdir()?;
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o500))?;
    Ok(dir)
}

/// What to tell the author of `plugin` about `path`, which it tried to open and no grant covers:
/// the `--grant` of its own request that covers the path, or that it requests none (grants only
/// ever give what a plugin asks for).
fn ungranted_warning(plugin: &PluginInfo, path: &str) -> String {
    let covering =
        plugin.capabilities.iter().find_map(|request| {
            match grants::Grant::from_request(&request.capability) {
                Ok(grants::Grant::Read(asked)) if grants::is_within(path, &asked) => Some(asked),
                _ => None,
            }
        });
    match covering {
        Some(asked) => format!(
            "opened {path}, which is not granted: add --grant {}:read:{asked}",
            plugin.name
        ),
        None => format!(
            "opened {path}, which is not granted, and its description asks for no path that covers it \
             (a plugin only ever gets the read paths it asks for)"
        ),
    }
}

/// A WASI context builder for a plugin. Filesystem calls run on the calling thread: plugins make
/// thousands of small reads of /proc and /sys, and a trip to the blocking pool for each cost more
/// than the read itself (setup ran about 5x slower). A call stuck in a hung filesystem could not
/// be interrupted on the pool either. Set before any preopen is added: each preopen copies it.
fn wasi_builder() -> WasiCtxBuilder {
    let mut builder = WasiCtxBuilder::new();
    builder.allow_blocking_current_thread(true);
    builder
}

/// The variables of the factbuoy process's environment a plugin sees (through
/// `wasi:cli/environment`), besides every `LC_*`: who and where the process runs, never a
/// token or password. Ansible's `env` and `user_id` facts come from them.
pub const PASSED_ENVIRONMENT: &[&str] = &[
    "HOME", "LANG", "LANGUAGE", "LOGNAME", "USER", "PATH", "SHELL", "TERM", "TZ", "PWD",
];

/// The part of `vars` a plugin sees: [`PASSED_ENVIRONMENT`] and `LC_*`, when valid UTF-8.
fn passed_environment(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(String, String)> {
    vars.filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .filter(|(name, _)| {
            PASSED_ENVIRONMENT.contains(&name.as_str())
                || name.strip_prefix("LC_").is_some_and(|rest| {
                    !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                })
        })
        .collect()
}

/// Where a guest path lives on the host: below `root`.
fn host_path(root: &Path, guest_path: &str) -> PathBuf {
    root.join(guest_path.trim_start_matches('/'))
}

/// wasmtime's error into anyhow, keeping the whole chain in the message.
fn wasm_error(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ungranted_path_is_answered_with_the_request_that_covers_it_or_none() {
        use bindings::{Capability, CapabilityRequest};
        let info = PluginInfo {
            name: "p".into(),
            version: "1.0.0".into(),
            description: String::new(),
            parameters: Vec::new(),
            capabilities: vec![
                CapabilityRequest {
                    capability: Capability::HostInfo,
                    required: true,
                    reason: String::new(),
                },
                CapabilityRequest {
                    capability: Capability::ReadPath("/etc".into()),
                    required: false,
                    reason: String::new(),
                },
            ],
            artifacts: Vec::new(),
        };
        assert_eq!(
            ungranted_warning(&info, "/etc/ssh/sshd_config"),
            "opened /etc/ssh/sshd_config, which is not granted: add --grant p:read:/etc"
        );
        let uncovered = ungranted_warning(&info, "/var/log/syslog");
        assert!(
            uncovered.contains("its description asks for no path that covers it"),
            "{uncovered}"
        );
    }

    #[test]
    fn only_named_variables_are_passed() {
        let vars = [
            ("HOME", "/root"),
            ("LC_TIME", "C"),
            ("LC_", "x"),
            ("LC_lower", "x"),
            ("AWS_SECRET_ACCESS_KEY", "k"),
            ("USER", "root"),
            ("FACTBUOY_TOKEN", "t"),
        ]
        .map(|(n, v)| (n.into(), v.into()));
        assert_eq!(
            passed_environment(vars.into_iter()),
            [("HOME", "/root"), ("LC_TIME", "C"), ("USER", "root")]
                .map(|(n, v)| (n.to_owned(), v.to_owned()))
        );
    }

    #[test]
    fn guest_paths_map_below_the_root() {
        assert_eq!(
            host_path(Path::new("/host"), "/proc"),
            PathBuf::from("/host/proc")
        );
        assert_eq!(
            host_path(Path::new("/"), "/var/log/journal"),
            PathBuf::from("/var/log/journal")
        );
    }
}
