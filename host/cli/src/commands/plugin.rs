//! `factbuoy plugin ...`: list, info, validate and run plugins on this host; create and build
//! plugin projects (with factbuoy-authoring); push them to and pull them from OCI registries
//! ([`registry`]); list and prune the compilation cache ([`cache`]).

mod cache;
mod common;
mod registry;
mod run;

use common::runtime;

use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use serde_json::json;

use crate::output::{ExitStatus, Format, emit, emit_document};
use factbuoy_catalog::{BUNDLED, PluginRef};
use factbuoy_protocol::text::printable;
use factbuoy_runtime::Limits;
use factbuoy_runtime::definition::Definition;

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// List the plugins bundled in this binary.
    #[command(after_help = "Examples:\n  factbuoy plugin list\n  factbuoy plugin list -o json")]
    List(common::CommonArgs),
    /// Show a plugin's metadata: parameters, capabilities, artifacts.
    #[command(
        after_help = "Examples:\n  factbuoy plugin info setup\n  factbuoy plugin info ./my.wasm -o yaml"
    )]
    Info {
        /// A bundled plugin's name, a path to a `.wasm` component or an
        /// oci://REGISTRY/REPOSITORY:TAG reference.
        #[arg(value_parser = crate::flags::PluginName, hide_possible_values = true)]
        plugin: String,
        #[command(flatten)]
        common: common::CommonArgs,
    },
    /// Check that a file is a factbuoy gatherer this binary can run.
    #[command(
        after_help = "Examples:\n  factbuoy plugin validate ./target/wasm32-wasip2/release/my_plugin.wasm"
    )]
    Validate {
        /// Path to a `.wasm` component.
        path: PathBuf,
        #[command(flatten)]
        common: common::CommonArgs,
    },
    /// Run a plugin on this host and print or write its artifacts; given a project directory,
    /// build it first when it changed, and with --watch again on every save.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin run hello -p hello:greeting=hi      # artifacts to stdout, summary to stderr\n  \
        factbuoy plugin run setup --out facts/              # artifacts to files\n  \
        factbuoy plugin run ./my.wasm --grant my-plugin:read:/etc -o json\n  \
        factbuoy plugin run . --grant my-plugin:host-info --watch   # build and run on every save")]
    Run(run::PluginRunArgs),
    /// Create a plugin project in ./NAME, in Rust, Python or JavaScript, ready to build.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin new disk-usage --lang python\n  \
        factbuoy plugin new disk-usage --lang js && cd disk-usage && npm install\n  \
        factbuoy plugin new disk-usage --lang rust --dir ~/src/disk-usage\n\n\
        The project holds the WIT contract of this factbuoy (and for Python and JavaScript the SDK),\n\
        so it builds outside a factbuoy checkout. Then: cd NAME && factbuoy plugin build")]
    New {
        /// The plugin's name: a-z, 0-9 and `-`, starting with a letter.
        name: String,
        /// The language to write it in.
        #[arg(long, value_enum)]
        lang: factbuoy_authoring::Lang,
        /// Where to create the project [default: ./NAME].
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Build the plugin project in a directory, precompile it, and print the component's path.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin build                     # the project in this directory\n  \
        factbuoy plugin run \"$(factbuoy plugin build ./disk-usage)\" --grant disk-usage:host-info\n\n\
        Rust projects (Cargo.toml) are built with cargo for wasm32-wasip2; Python projects (app.py)\n\
        with componentize-py, from the project's .venv or PATH; JavaScript projects (package.json)\n\
        with componentize-js, from the project's node_modules or PATH. The component is then\n\
        compiled into the cache `plugin run` uses, so that even its first run starts at once.\n\
        Exit status: 1 when the toolchain ran and failed, 2 when it is missing.")]
    Build {
        /// The project directory.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Build a Python or JavaScript project even when nothing it is built from changed.
        #[arg(long)]
        force: bool,
        #[command(flatten)]
        common: common::CommonArgs,
    },
    /// Push a plugin to an OCI registry as a Wasm artifact and print its reference pinned by
    /// digest.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin push ./disk_usage.wasm oci://registry.example:5000/plugins/disk-usage:1.0\n  \
        factbuoy plugin push hello oci://localhost:5000/hello:1 --tls-verify=false -o json\n\n\
        The artifact is the CNCF TAG Runtime's Wasm OCI layout (config\n\
        application/vnd.wasm.config.v0+json, one application/wasm layer), which skopeo, oras and\n\
        wkg read too. Credentials come from `podman login`/`docker login` (or --authfile), CA\n\
        certificates from /etc/containers/certs.d/HOST:PORT (or --cert-dir).")]
    Push(registry::PushArgs),
    /// Pull a plugin from an OCI registry into a .wasm file, or into an OCI layout directory.
    #[command(after_help = "Examples:\n  \
        factbuoy plugin pull oci://registry.example:5000/plugins/disk-usage:1.0\n  \
        factbuoy plugin pull oci://registry.example:5000/plugins/disk-usage@sha256:... --out du.wasm\n  \
        factbuoy plugin pull oci://registry.example:5000/plugins/disk-usage:1.0 --layout ./offline\n\n\
        Plugins run straight from a registry too: factbuoy plugin run oci://..., run --plugin oci://...")]
    Pull(registry::PullArgs),
    /// Sign a plugin in a registry with your key, in cosign's layout (a `sha256-DIGEST.sig`
    /// tag beside it), so that runs with --require-signature accept it.
    #[command(after_help = "Examples:\n  \
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out signing.pem\n  \
        openssl pkey -in signing.pem -pubout -out signing.pub\n  \
        factbuoy plugin sign oci://registry.example:5000/plugins/disk-usage:1.0 --key signing.pem\n  \
        factbuoy run --plugin oci://registry.example:5000/plugins/disk-usage:1.0 \\\n      \
        --require-signature signing.pub\n\n\
        The signature is of the manifest digest the tag names now; pushing again under the tag\n\
        makes a new digest, which needs its own signature.")]
    Sign(registry::SignArgs),
    /// List and prune the cache of compiled plugins, which keeps itself under a size (1 GiB).
    #[command(
        subcommand,
        after_help = "Examples:\n  \
        factbuoy plugin cache list\n  \
        factbuoy plugin cache prune --max-size 200MiB\n\n\
        Each plugin is compiled once for this machine and kept in ~/.cache/factbuoy/components\n\
        ($FACTBUOY_CACHE_DIR); the least recently used are removed once all exceed\n\
        $FACTBUOY_CACHE_MAX_SIZE (default 1GiB)."
    )]
    Cache(cache::CacheCommand),
}

pub async fn execute(command: PluginCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        PluginCommand::List(common) => list(&common, format).await,
        PluginCommand::Info { plugin, common } => {
            let runtime = runtime(&common, Limits::default())?;
            let loaded = PluginRef::parse(&plugin)?
                .load(&runtime, &common.registry.access())
                .await?;
            match format {
                Format::Table => {
                    emit(factbuoy_present::plugin::describe_text(&loaded.info).trim_end())
                }
                machine => emit_document(&Definition::from(&loaded.info), machine),
            }
            Ok(ExitStatus::Success)
        }
        PluginCommand::Validate { path, common } => {
            let runtime = runtime(&common, Limits::default())?;
            let loaded = runtime.load_file(&path).await?;
            match format {
                Format::Table => emit(&format!(
                    "{}: valid factbuoy gatherer {} {}",
                    path.display(),
                    loaded.info.name,
                    loaded.info.version
                )),
                machine => emit_document(
                    &json!({"valid": true, "path": path, "name": loaded.info.name, "version": loaded.info.version}),
                    machine,
                ),
            }
            Ok(ExitStatus::Success)
        }
        PluginCommand::Run(args) => run::run(args, format).await,
        PluginCommand::Push(args) => registry::push(args, format).await,
        PluginCommand::Pull(args) => registry::pull(args, format).await,
        PluginCommand::Sign(args) => registry::sign(args, format).await,
        PluginCommand::New { name, lang, dir } => {
            let dir = dir.unwrap_or_else(|| PathBuf::from(&name));
            let written = factbuoy_authoring::new_project(&name, lang, &dir)?;
            match format {
                Format::Table => {
                    for path in &written {
                        emit(&dir.join(path).display().to_string());
                    }
                    eprintln!(
                        "created {} plugin {name} in {}; build it with: cd {} && {}",
                        lang.name(),
                        dir.display(),
                        dir.display(),
                        lang.build_steps()
                    );
                }
                machine => emit_document(
                    &json!({"name": name, "dir": dir, "files": written}),
                    machine,
                ),
            }
            Ok(ExitStatus::Success)
        }
        PluginCommand::Cache(command) => cache::execute(command, format),
        PluginCommand::Build { dir, force, common } => {
            // Building blocks on child processes; keep the runtime's threads free meanwhile.
            let wasm = tokio::task::spawn_blocking(move || factbuoy_authoring::build(&dir, force))
                .await??;
            precompile(&wasm, &common).await?;
            match format {
                Format::Table => emit(&wasm.display().to_string()),
                machine => emit_document(&json!({"wasm": wasm}), machine),
            }
            Ok(ExitStatus::Success)
        }
    }
}

/// Compiles a freshly built component into the cache `plugin run` loads from (with the same
/// engine settings as a run with default limits), checking on the way that it loads and
/// describes itself: a JavaScript or Python component takes seconds to compile, and this moves
/// that wait from the first run to the build.
async fn precompile(wasm: &std::path::Path, common: &common::CommonArgs) -> anyhow::Result<()> {
    if common.no_cache {
        return Ok(());
    }
    let runtime = runtime(common, Limits::default())?;
    let started = std::time::Instant::now();
    let loaded = runtime
        .load_file(wasm)
        .await
        .with_context(|| format!("built {}, but it is not a usable plugin", wasm.display()))?;
    eprintln!(
        "precompiled {} {} in {:.1} s; its first run starts from the compilation cache",
        loaded.info.name,
        printable(&loaded.info.version),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

async fn list(common: &common::CommonArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let runtime = runtime(common, Limits::default())?;
    let mut infos = Vec::new();
    for bundled in BUNDLED {
        let loaded = runtime.load(bundled.name, bundled.wasm, Some(bundled.sha256));
        infos.push(loaded.await?.info);
    }
    match format {
        machine @ (Format::Json | Format::Yaml) => emit_document(
            &infos.iter().map(Definition::from).collect::<Vec<_>>(),
            machine,
        ),
        Format::Table => {
            let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(0);
            for info in &infos {
                emit(&format!(
                    "{:width$}  {:8}  {}",
                    info.name, info.version, info.description
                ));
            }
        }
    }
    Ok(ExitStatus::Success)
}
