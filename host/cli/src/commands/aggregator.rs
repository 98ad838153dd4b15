//! `factbuoy aggregator ...`: a run's aggregator as a process of its own, for agents on other
//! machines (outbound connections only, `factbuoy agent`), for restarting an aggregator mid-run,
//! and as the aggregator pod of a Kubernetes run.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use bytesize::ByteSize;
use clap::{Args, Subcommand};
use factbuoy_aggregator::config::{self, ServerLimits};
use factbuoy_kubernetes::ResourceKind;
use factbuoy_operator::separate::{self, SeparateRun};
use factbuoy_present::summary;
use factbuoy_protocol::identity::Role;
use factbuoy_protocol::names::NodeName;
use factbuoy_runtime::limits;

use crate::flags::PluginName;
use crate::output::{ExitStatus, Format, emit, emit_document};

// Parsed once per process; boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum AggregatorCommand {
    /// Create a run directory: its CA, certificates, plan and expected nodes.
    #[command(after_help = "Examples:\n  \
        factbuoy aggregator create --run-dir ./run --node web-1 --node web-2 \\\n      \
        --listen 0.0.0.0:7443 --server-name aggregator.example.com\n  \
        factbuoy aggregator create --run-dir ./run --node db-1 --plugin setup \\\n      \
        -p setup:gather_subset=hardware")]
    Create(CreateArgs),
    /// Issue a client certificate from a run's CA into a directory (ca.pem, client.pem, client.key).
    #[command(after_help = "Examples:\n  \
        factbuoy aggregator issue --run-dir ./run --role agent:web-1 --out ./web-1-creds\n  \
        factbuoy aggregator issue --run-dir ./run --role global:runner --out ./global-creds")]
    Issue {
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        /// `agent:NODE`, `operator:NAME` or `global:NAME`; NODE must be one of the run's nodes.
        #[arg(long, value_parser = Role::parse)]
        role: Role,
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Serve a run: a new one, or one whose aggregator stopped, continuing where it was.
    #[command(after_help = "Examples:\n  \
        factbuoy aggregator serve --run-dir ./run\n  \
        factbuoy aggregator serve --run-dir ./run --exit-when-complete   # then the bundle is in --out")]
    Serve {
        #[arg(long, value_name = "DIR")]
        run_dir: PathBuf,
        /// Exit once the bundle is written instead of serving it until stopped.
        #[arg(long)]
        exit_when_complete: bool,
    },
    /// Serve a run as a pod of a Kubernetes cluster: what the aggregator pod of
    /// `factbuoy run --kubernetes` (and of `factbuoy gen`'s manifests) runs.
    #[command(after_help = "Examples:\n  \
        # As the aggregator pod's container runs it (see `factbuoy gen`):\n  \
        factbuoy aggregator serve-kubernetes --plan /etc/factbuoy/run.json \\\n      \
        --operator-ca /etc/factbuoy/operator-ca.pem --run-dir /var/lib/factbuoy --resources nodes")]
    ServeKubernetes(ServeKubernetesArgs),
}

#[derive(Debug, Args)]
pub struct CreateArgs {
    #[arg(long, value_name = "DIR")]
    run_dir: PathBuf,
    /// A node expected to send results; repeat for each.
    #[arg(long = "node", required = true)]
    nodes: Vec<NodeName>,
    /// Plugins to run, by bundled name or path [default: as for `factbuoy run`].
    #[arg(long = "plugin", value_name = "NAME|PATH", value_parser = PluginName, hide_possible_values = true)]
    plugins: Vec<String>,
    /// PLUGIN:NAME=VALUE.
    #[arg(short, long = "param", value_parser = factbuoy_operator::plan::scoped_param)]
    params: Vec<(String, String)>,
    /// One of the run's plugins whose single result covers the whole run (a cluster-level
    /// gatherer) instead of one per node. Agents do not run it; the holder of a `global:`
    /// certificate delivers its result. Repeat for each.
    #[arg(long = "global", value_name = "PLUGIN", value_parser = PluginName, hide_possible_values = true)]
    global: Vec<String>,
    /// PLUGIN:CAPABILITY, for plugins from files.
    #[arg(long, value_parser = factbuoy_operator::plan::scoped_grant)]
    grant: Vec<(String, String)>,
    /// Agent listener address; port 0 picks one at the first start, kept for restarts.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// Operator listener address.
    #[arg(long, default_value = "127.0.0.1:0")]
    operator_listen: SocketAddr,
    /// A name or address agents dial, for the server certificate; repeat for each.
    #[arg(long = "server-name", default_values = ["localhost", "127.0.0.1"])]
    server_names: Vec<String>,
    /// Where the bundle is written.
    #[arg(long, default_value = ".", value_name = "DIR")]
    out: PathBuf,
    #[arg(long, default_value_t = config::DEFAULT_HEARTBEAT.into())]
    heartbeat: humantime::Duration,
    /// Silence after which a node is marked lost.
    #[arg(long, default_value_t = config::DEFAULT_LOST_AFTER.into())]
    lost_after: humantime::Duration,
    #[arg(long, default_value_t = config::DEFAULT_RUN_TIMEOUT.into())]
    timeout: humantime::Duration,
    #[arg(long, default_value_t = limits::DEFAULT_DEADLINE.into())]
    plugin_timeout: humantime::Duration,
    #[command(flatten)]
    registry: crate::flags::RegistryArgs,
    /// Largest accepted result file.
    #[arg(long, default_value_t = ByteSize::b(config::DEFAULT_MAX_FILE_BYTES))]
    max_file: ByteSize,
    /// Slowest accepted average upload rate, per second, once an upload is older than the grace.
    #[arg(long, default_value_t = ByteSize::b(config::DEFAULT_MIN_UPLOAD_BYTES_PER_SECOND))]
    min_upload_rate: ByteSize,
    #[arg(long, default_value_t = config::DEFAULT_UPLOAD_GRACE.into())]
    upload_grace: humantime::Duration,
    /// Connections each listener serves at once; more are closed as they arrive.
    #[arg(long, default_value_t = config::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
}

#[derive(Debug, Args)]
pub struct ServeKubernetesArgs {
    /// The run plan (`run.json` of ConfigMap factbuoy-run).
    #[arg(long, value_name = "FILE")]
    plan: PathBuf,
    /// Where the parts of the plugin components not bundled in the image are mounted, one
    /// folder per ConfigMap `factbuoy-plugin-part-<n>`.
    #[arg(long, value_name = "DIR", default_value = factbuoy_kubernetes::COMPONENTS_DIR)]
    components: PathBuf,
    /// The operator CA certificate: the operator listener accepts operators it signed.
    #[arg(long, value_name = "FILE")]
    operator_ca: PathBuf,
    /// The run directory (an emptyDir: it outlives a restart of the container, not of the pod).
    #[arg(long, value_name = "DIR")]
    run_dir: PathBuf,
    /// How long an expected node may stay NotReady before its missing results are given up as
    /// lost.
    #[arg(long, default_value = "60s")]
    lost_after: humantime::Duration,
    /// The kinds of cluster objects saved into the bundle's resources/ (the run's RBAC lets it
    /// list exactly these).
    #[arg(long, value_name = "KIND,...", value_delimiter = ',', default_value = "nodes,namespaces", value_parser = factbuoy_kubernetes::resource_kind)]
    resources: Vec<&'static ResourceKind>,
    /// The run has secret parameters: read their values from Secret `factbuoy-secrets` of the
    /// pod's namespace (waiting for it to be created), and delete it when the run ends.
    #[arg(long)]
    secrets: bool,
    /// The auth file to pull the run's registry plugins with (Secret `factbuoy-registry`).
    #[arg(long, value_name = "FILE")]
    registry_authfile: Option<PathBuf>,
    /// A directory of the registries' CA certificates (*.crt).
    #[arg(long, value_name = "DIR")]
    registry_cert_dir: Option<PathBuf>,
}

pub async fn aggregator(command: AggregatorCommand, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        AggregatorCommand::Create(args) => create(args, format).await,
        AggregatorCommand::Issue { run_dir, role, out } => {
            factbuoy_operator::separate::issue(&run_dir, &role, &out)?;
            emit(&format!(
                "issued a certificate for the {role} into {}",
                out.display()
            ));
            Ok(ExitStatus::Success)
        }
        AggregatorCommand::ServeKubernetes(args) => {
            let options = factbuoy_kubernetes::PodServeOptions {
                plan: args.plan,
                components: args.components,
                operator_ca: args.operator_ca,
                run_dir: args.run_dir,
                lost_after: *args.lost_after,
                resources: args.resources,
                secrets: args.secrets,
                registry: factbuoy_registry::RegistryAccess {
                    auth_file: args.registry_authfile,
                    cert_dir: args.registry_cert_dir,
                    ..factbuoy_registry::RegistryAccess::default()
                },
            };
            // Heard from before it serves, not from when the server first polls it.
            let stop = crate::signals::interrupted();
            let shutdown = async {
                stop.await;
            };
            factbuoy_kubernetes::pod::serve(options, shutdown).await?;
            Ok(ExitStatus::Success)
        }
        AggregatorCommand::Serve {
            run_dir,
            exit_when_complete,
        } => {
            let mut running = factbuoy_operator::separate::serve(&run_dir).await?;
            // One line for scripts: where the listeners are.
            emit(
                &serde_json::json!({
                    "agent_address": running.agent_address,
                    "operator_address": running.operator_address,
                })
                .to_string(),
            );
            // For a person: what the run waits for, each time that changes, then its summary.
            let lost_after = running.config().lost_after_seconds;
            let mut every = tokio::time::interval(WAITING_EVERY);
            let mut said = String::new();
            loop {
                tokio::select! {
                    _ = running.finished() => break,
                    _ = every.tick() => {
                        let line = summary::waiting(&running.status_document(), lost_after);
                        if line != said {
                            eprintln!("{line}");
                            said = line;
                        }
                    }
                }
            }
            let document = running.status_document();
            eprintln!(
                "{}",
                summary::text(&document, Some(running.config().bundle_dir.as_path()))
            );
            if !exit_when_complete {
                // Keep serving status and the bundle until stopped.
                std::future::pending::<()>().await;
            }
            Ok(ExitStatus::Success)
        }
    }
}

/// How often `aggregator serve` looks at what its run waits for.
const WAITING_EVERY: Duration = Duration::from_secs(1);

async fn create(args: CreateArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let selection = factbuoy_operator::PluginSelection {
        plugins: args.plugins,
        params: args.params,
        grants: args.grant,
        denies: Vec::new(),
        global: args.global,
        deadline: *args.plugin_timeout,
        registry: args.registry.access(),
    };
    let run = SeparateRun {
        run_dir: args.run_dir.clone(),
        nodes: args.nodes,
        agent_listen: args.listen,
        operator_listen: args.operator_listen,
        server_names: args.server_names,
        bundle_dir: args.out,
        heartbeat: *args.heartbeat,
        lost_after: *args.lost_after,
        timeout: *args.timeout,
        limits: ServerLimits {
            max_file_bytes: args.max_file.as_u64(),
            min_upload_bytes_per_second: args.min_upload_rate.as_u64(),
            upload_grace_seconds: args.upload_grace.as_secs(),
            max_connections: args.max_connections.max(1),
            ..ServerLimits::default()
        },
    };
    let run_id = separate::create(&selection, &run).await?;
    match format {
        Format::Table => emit(&format!(
            "created run {run_id} in {}",
            args.run_dir.display()
        )),
        machine => emit_document(
            &serde_json::json!({ "run_id": run_id, "run_dir": args.run_dir }),
            machine,
        ),
    }
    Ok(ExitStatus::Success)
}
