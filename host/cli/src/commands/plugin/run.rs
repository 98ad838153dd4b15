//! `factbuoy plugin run`: a plugin on this host, from a bundled name, a component file, or a
//! project directory that is built first (a Python or JavaScript project as a development build,
//! which reads its code at run time); with `--watch`, built and run again on every save.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use bytesize::ByteSize;
use clap::Args;
use factbuoy_authoring::Runnable;
use factbuoy_operator::here::{HereRequest, Scoped};
use factbuoy_present::json_report::JsonReport;
use factbuoy_runtime::sink::{ArtifactSink, DirectorySink, StdoutSink};
use factbuoy_runtime::{InvocationReport, Limits, limits};

use super::common::{CommonArgs, runtime};
use crate::output::{ExitStatus, Format, emit, emit_document, report_error};

#[derive(Debug, Args)]
pub struct PluginRunArgs {
    /// A bundled plugin's name, a path to a `.wasm` component, an oci://REGISTRY/REPOSITORY:TAG
    /// reference (or @sha256:DIGEST), or a plugin project's directory
    /// (built first when anything it is built from changed; a Python or JavaScript project as a
    /// development build, which reads the project's code when it runs, so that an edit runs at
    /// once).
    #[arg(value_parser = crate::flags::PluginName, hide_possible_values = true)]
    plugin: String,
    /// With a Python or JavaScript project: build and run the component `plugin build` writes,
    /// which other hosts run, instead of a development build.
    #[arg(long)]
    release: bool,
    /// With a project directory: after the run, wait for a file of the project to change, then
    /// build and run again, until interrupted (Ctrl-C). A failed build or run is reported and
    /// waits for the next change.
    #[arg(long)]
    watch: bool,
    /// A parameter, e.g. hello:greeting=hi, as `run` takes it (the `hello:` may be left out
    /// here); repeat for several, and to add to a list parameter.
    #[arg(short, long = "param", value_name = "PLUGIN:NAME=VALUE", value_parser = Scoped::param)]
    params: Vec<Scoped>,
    /// Grant a capability, e.g. hello:host-info or hello:read:/etc (`all`: everything the plugin
    /// asks). Bundled plugins get what they ask for by default; plugins from files get nothing.
    #[arg(long, value_name = "PLUGIN:CAPABILITY", value_parser = Scoped::capability)]
    grant: Vec<Scoped>,
    /// Take a capability away (wins over --grant), e.g. hello:host-info or hello:read:/etc.
    #[arg(long, value_name = "PLUGIN:CAPABILITY", value_parser = Scoped::capability)]
    deny: Vec<Scoped>,
    /// Host directory the plugin's granted paths are mapped onto (`/host` in a pod).
    #[arg(long, default_value = "/", value_name = "DIR")]
    root: PathBuf,
    /// Write artifacts below this directory instead of printing them.
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Wall-clock deadline for the run, e.g. 30s or 5m.
    #[arg(long, default_value_t = limits::DEFAULT_DEADLINE.into())]
    deadline: humantime::Duration,
    /// Memory limit, e.g. 512MiB.
    #[arg(long, default_value_t = ByteSize::b(limits::DEFAULT_MEMORY_BYTES))]
    memory: ByteSize,
    /// Wasm stack limit, e.g. 1MiB.
    #[arg(long, default_value_t = ByteSize::b(limits::DEFAULT_STACK_BYTES as u64))]
    stack: ByteSize,
    /// Limit on all artifacts together, e.g. 4GiB.
    #[arg(long, default_value_t = ByteSize::b(limits::DEFAULT_OUTPUT_BYTES))]
    max_output: ByteSize,
    /// Limit on captured stdout and on captured stderr, each.
    #[arg(long, default_value_t = ByteSize::b(limits::DEFAULT_CAPTURED_STDIO_BYTES as u64))]
    max_stdio: ByteSize,
    #[command(flatten)]
    common: CommonArgs,
}

impl PluginRunArgs {
    fn limits(&self) -> Limits {
        Limits {
            deadline: *self.deadline,
            memory_bytes: self.memory.as_u64(),
            stack_bytes: self.stack.as_u64() as usize,
            output_bytes: self.max_output.as_u64(),
            captured_stdio_bytes: self.max_stdio.as_u64() as usize,
            ..Limits::default()
        }
    }
}

pub(super) async fn run(args: PluginRunArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let project = Path::new(&args.plugin).is_dir();
    if (args.watch || args.release) && !project {
        anyhow::bail!(
            "--{} is for a plugin project: give the project's directory, not {:?}",
            if args.watch { "watch" } else { "release" },
            args.plugin
        );
    }
    if !project {
        return run_once(&args, &args.plugin, None, format).await;
    }
    let dir = PathBuf::from(&args.plugin);
    let Some(watch) = args
        .watch
        .then(|| factbuoy_authoring::SourceWatch::new(&dir))
        .transpose()?
    else {
        let built = build(&dir, args.release).await?;
        return run_built(&args, built, format).await;
    };
    // Watching from before the first build: a save during a build or a run is not lost.
    let mut watch = watch;
    loop {
        let built = build(&dir, args.release).await;
        let ran = match built {
            Ok(built) => run_built(&args, built, format).await,
            Err(e) => Err(e),
        };
        if let Err(e) = ran {
            report_error(&e, Format::Table);
        }
        eprintln!("watching {} for changes (Ctrl-C ends)", dir.display());
        let (watched, changed) = tokio::task::spawn_blocking(move || {
            let changed = watch.next_change();
            (watch, changed)
        })
        .await?;
        watch = watched;
        let changed = changed?;
        let named: Vec<String> = changed.iter().map(|p| p.display().to_string()).collect();
        eprintln!("changed: {}; building again", named.join(", "));
    }
}

/// Builds the project in `dir` to run it (skipped when nothing it is built from changed): as
/// `plugin build` does when `release`, else for development.
async fn build(dir: &Path, release: bool) -> anyhow::Result<Runnable> {
    let dir = dir.to_owned();
    // Building blocks on child processes; keep the runtime's threads free meanwhile.
    Ok(tokio::task::spawn_blocking(move || {
        if release {
            factbuoy_authoring::build(&dir, false).map(|wasm| Runnable {
                wasm,
                sources: None,
            })
        } else {
            factbuoy_authoring::build_for_run(&dir)
        }
    })
    .await??)
}

/// Runs what a project's build made once as `args` say.
async fn run_built(
    args: &PluginRunArgs,
    built: Runnable,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    run_once(
        args,
        &built.wasm.display().to_string(),
        built.sources,
        format,
    )
    .await
}

/// Runs `plugin` (a bundled name or a component's path; a development build with its
/// `sources`) once as `args` say.
async fn run_once(
    args: &PluginRunArgs,
    plugin: &str,
    sources: Option<PathBuf>,
    format: Format,
) -> anyhow::Result<ExitStatus> {
    let runtime = runtime(&args.common, args.limits())?;
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    }
    // Artifacts go to --out when given; otherwise to stdout, or into the JSON report, streamed
    // from files in a private directory that is removed afterwards.
    let embedded = match (&args.out, format) {
        (None, Format::Json | Format::Yaml) => {
            Some(tempfile::tempdir().context("creating a temporary directory")?)
        }
        _ => None,
    };
    let sink: Arc<dyn ArtifactSink> = match (&args.out, &embedded) {
        (Some(out), _) => Arc::new(DirectorySink::new(out)),
        (None, Some(dir)) => Arc::new(DirectorySink::new(dir.path())),
        (None, None) if std::io::stdout().is_terminal() => {
            Arc::new(factbuoy_present::terminal_sink::TerminalSink)
        }
        (None, None) => Arc::new(StdoutSink),
    };
    let scoped = |all: &[Scoped]| Scoped::pairs(all, plugin);
    let request = HereRequest {
        plugin: plugin.to_owned(),
        registry: args.common.registry.access(),
        params: scoped(&args.params),
        grants: scoped(&args.grant),
        denies: scoped(&args.deny),
        host_root: args.root.clone(),
        sink,
        limits: None,
        sources,
    };
    let report = factbuoy_operator::here::run_plugin(&runtime, request).await?;
    match format {
        Format::Table => print_summary(
            &report,
            args.out.is_some(),
            &Scoped::read_paths(&args.grant),
        ),
        machine => match &embedded {
            Some(dir) => emit_document(&JsonReport::new(&report, dir.path())?, machine),
            None => emit_document(&report, machine),
        },
    }
    Ok(if report.succeeded {
        ExitStatus::Success
    } else {
        ExitStatus::Failed
    })
}

/// The text summary ([`factbuoy_present::plugin::run_lines`]): on stdout when artifacts went to
/// files, on stderr when they went to stdout.
fn print_summary(report: &InvocationReport, artifacts_in_files: bool, read_grants: &[String]) {
    let text = factbuoy_present::plugin::run_lines(report, read_grants).join("\n");
    if artifacts_in_files && report.succeeded {
        emit(&text);
    } else {
        eprintln!("{text}");
    }
}
