//! Loading a plugin: compiling its component (or taking it from the cache), linking it
//! against the contract it was built for, and asking it to describe itself.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store, UpdateDeadline};
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

use crate::bindings::{GathererPre, PLUGIN_EXPORT, PluginInfo};
use crate::capture::CaptureStream;
use crate::contract::PluginPre;
use crate::engine::Allocator;
use crate::failure::PluginFailure;
use crate::instance::output::OutputState;
use crate::instance::progress::ProgressObserver;
use crate::instance::progress::ProgressState;
use crate::instance::{Access, InstanceState};
use crate::limits::Limits;
use crate::sink::ArtifactSink;
use crate::stop::StopSignal;
use crate::violation::Violation;
use crate::{bindings, cache, capture, contract, description, engine, failure, interfaces, sink};

/// Where a development build finds its project's sources ([`Runtime::load_development`]): a
/// guest path no grant is likely to name, mapped read-only in its runs and nowhere else.
pub const SOURCES_GUEST_PATH: &str = "/factbuoy-sources";

/// How long `describe` may take; it must not touch the host, so this is generous.
pub const DESCRIBE_DEADLINE: Duration = Duration::from_secs(10);
/// Bytes of the end of stderr searched for a panic message.
pub(crate) const PANIC_SEARCH_BYTES: usize = capture::TAIL_BYTES;

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
    pub(crate) engine: Engine,
    pub(crate) allocator: Allocator,
    pub(crate) linker: Linker<InstanceState>,
    pub(crate) cache: cache::ComponentCache,
    pub(crate) limits: Limits,
    /// An empty, read-only directory mapped at `/` for runs that are not granted `/`, so that
    /// opening a path outside every grant reaches the host, which says which grant is missing
    /// ([`InvocationReport::ungranted_paths`]). `None` where no temporary directory could be made:
    /// such paths are then only "not found".
    pub(crate) ungranted_root: Option<tempfile::TempDir>,
}

/// A plugin ready to run: compiled, linked and described.
pub struct LoadedPlugin {
    /// Where it came from, for messages: a bundled name or a file path.
    pub label: String,
    /// What the plugin's `describe` returned, checked.
    pub info: PluginInfo,
    /// The project folder a development build reads its code from, mapped read-only at
    /// [`SOURCES_GUEST_PATH`] in each of its runs; `None` for every other component.
    pub sources: Option<PathBuf>,
    /// How it was loaded: from the cache or compiled, and how long that took.
    pub load: LoadReport,
    pub(crate) pre: PluginPre<InstanceState>,
}

impl LoadedPlugin {
    /// The names the component imports and exports (`wasi:io/streams@0.2.0`,
    /// `factbuoy:plugin/plugin@0.2.0`, ...), in order: what a registry artifact's config
    /// lists as its world.
    pub fn world(&self) -> (Vec<String>, Vec<String>) {
        let component = self.pre.component();
        let ty = component.component_type();
        let engine = component.engine();
        let names = |items: &mut dyn Iterator<Item = &str>| items.map(str::to_owned).collect();
        (
            names(&mut ty.imports(engine).map(|(name, _)| name)),
            names(&mut ty.exports(engine).map(|(name, _)| name)),
        )
    }
}

/// How a plugin was loaded, in its invocation reports (and so in a bundle's `meta/reports/`):
/// what tells a cached load from a compilation on each node.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LoadReport {
    /// Whether its compiled code came from the cache; `false`: it was compiled for this load.
    pub cached: bool,
    /// Wall-clock time of the load (the cache or the compiler, linking, `describe`), in
    /// milliseconds.
    pub duration_ms: f64,
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
        self.load_file_with(path, None).await
    }

    /// Loads a development build (`factbuoy plugin run DIR` of a Python or JavaScript project):
    /// a component that reads its project's code at run time from `sources`, which each of its
    /// runs, `describe` included, sees read-only at [`SOURCES_GUEST_PATH`]. Editing the code
    /// then needs no new component, nor a compilation.
    pub async fn load_development(
        &self,
        path: &Path,
        sources: &Path,
    ) -> Result<LoadedPlugin, LoadError> {
        self.load_file_with(path, Some(sources)).await
    }

    async fn load_file_with(
        &self,
        path: &Path,
        sources: Option<&Path>,
    ) -> Result<LoadedPlugin, LoadError> {
        let started = Instant::now();
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
            return self
                .link_and_describe(&label, component, sources, (true, started))
                .await;
        }
        let wasm = std::fs::read(path).map_err(read_error)?;
        let sha256 = factbuoy_protocol::digest::sha256_hex(&wasm);
        let loaded = self
            .load_with(&label, &wasm, &sha256, sources, started)
            .await?;
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
        self.load_started(label, wasm, sha256, Instant::now()).await
    }

    /// [`Runtime::load`], timed from `started`.
    async fn load_started(
        &self,
        label: &str,
        wasm: &[u8],
        sha256: Option<&str>,
        started: Instant,
    ) -> Result<LoadedPlugin, LoadError> {
        let digest = match sha256 {
            Some(digest) => digest.to_owned(),
            None => factbuoy_protocol::digest::sha256_hex(wasm),
        };
        self.load_with(label, wasm, &digest, None, started).await
    }

    async fn load_with(
        &self,
        label: &str,
        wasm: &[u8],
        digest: &str,
        sources: Option<&Path>,
        started: Instant,
    ) -> Result<LoadedPlugin, LoadError> {
        let (component, cached) = self.compile(label, wasm, digest).await?;
        let loaded = self
            .link_and_describe(label, component, sources, (cached, started))
            .await?;
        let info = &loaded.info;
        self.cache
            .name_entry(digest, &format!("{} {}", info.name, info.version));
        Ok(loaded)
    }

    async fn link_and_describe(
        &self,
        label: &str,
        component: Component,
        sources: Option<&Path>,
        (cached, started): (bool, Instant),
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
        let info = self.describe(label, &pre, sources).await?;
        let problems = description::problems(&info);
        if !problems.is_empty() {
            return Err(LoadError::InvalidDescription {
                plugin: label.to_owned(),
                problems,
            });
        }
        let load = LoadReport {
            cached,
            duration_ms: started.elapsed().as_secs_f64() * 1000.0,
        };
        tracing::info!(
            plugin = %info.name,
            cached,
            load_ms = load.duration_ms.round(),
            "plugin loaded"
        );
        Ok(LoadedPlugin {
            label: label.to_owned(),
            info,
            sources: sources.map(Path::to_owned),
            load,
            pre,
        })
    }

    async fn compile(
        &self,
        label: &str,
        wasm: &[u8],
        digest: &str,
    ) -> Result<(Component, bool), LoadError> {
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
            return Ok((component, true));
        }
        // Compiling takes seconds of CPU, minutes on a slow node or in a debug build: off the
        // async threads, so that an agent's heartbeats, uploads and progress go on meanwhile.
        let (cache, engine, wasm) = (self.cache.clone(), self.engine.clone(), wasm.to_vec());
        let digest = digest.to_owned();
        let component = tokio::task::spawn_blocking(move || cache.compile(&engine, &wasm, &digest))
            .await
            .map_err(|e| compile_error(e.to_string()))?
            .map_err(|e| compile_error(format!("{e:#}")))?;
        Ok((component, false))
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
        sources: Option<&Path>,
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
        let mut wasi = wasi_builder();
        if let Some(sources) = sources {
            map_sources(&mut wasi, sources).map_err(|e| LoadError::Read {
                plugin: label.to_owned(),
                error: e,
            })?;
        }
        let mut store = self.new_store(label, wasi, limits, Access::none(), (sink, None), None);
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

    pub(crate) fn new_store(
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

/// A WASI context builder for a plugin. Filesystem calls run on the calling thread: plugins make
/// thousands of small reads of /proc and /sys, and a trip to the blocking pool for each cost more
/// than the read itself (setup ran about 5x slower). A call stuck in a hung filesystem could not
/// be interrupted on the pool either. Set before any preopen is added: each preopen copies it.
/// Maps a development build's `sources` read-only at [`SOURCES_GUEST_PATH`].
pub(crate) fn map_sources(wasi: &mut WasiCtxBuilder, sources: &Path) -> std::io::Result<()> {
    wasi.preopened_dir(sources, SOURCES_GUEST_PATH, FsPerms::ReadOnly)
        .map(|_| ())
        .map_err(|e| std::io::Error::other(format!("mapping {}: {e:#}", sources.display())))
}

pub(crate) fn wasi_builder() -> WasiCtxBuilder {
    let mut builder = WasiCtxBuilder::new();
    builder.allow_blocking_current_thread(true);
    builder
}

/// wasmtime's error into anyhow, keeping the whole chain in the message.
pub(crate) fn wasm_error(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!("{e:#}")
}
