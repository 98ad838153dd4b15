//! The `factbuoy` command line: argument parsing and printing only. What the commands do lives
//! in the library crates under host/ (docs/architecture.md).
//!
//! Exit codes: 0 success, 1 a plugin ran and failed, 2 the input was invalid (arguments,
//! parameters, a file that is not a usable plugin).

mod aggregator_cmd;
mod ansible_cmd;
mod json_report;
mod kube_cmd;
mod kube_run;
mod kube_serve;
mod output;
mod plan;
mod plugin_cmd;
mod run_cmd;
mod runs;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use output::{ExitStatus, Format, report_error};

/// factbuoy gathers facts about hosts with sandboxed WebAssembly gatherer plugins.
#[derive(Debug, Parser)]
#[command(
    name = "factbuoy",
    version,
    propagate_version = true,
    max_term_width = 100
)]
struct Cli {
    /// Output format: text for people, json for machines.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Text)]
    format: Format,

    /// More log output (-v info, -vv debug, -vvv trace). FACTBUOY_LOG overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Collect facts from this host: an aggregator on loopback, an agent over mutual TLS, one bundle.
    Run(run_cmd::RunArgs),
    /// Show a run's status: the current run's, or the one named (local or Kubernetes).
    Status(run_cmd::StatusArgs),
    /// Download a run's bundle, resuming a partial download (through port-forward for a Kubernetes run).
    Retrieve(run_cmd::RetrieveArgs),
    /// List, inspect, validate and run gatherer plugins on this host.
    #[command(subcommand)]
    Plugin(plugin_cmd::PluginCommand),
    /// Create, serve and issue certificates for a run whose agents are separate processes.
    #[command(subcommand)]
    Aggregator(aggregator_cmd::AggregatorCommand),
    /// Run the plugins an aggregator's plan names on this node and send it the results.
    Agent(aggregator_cmd::AgentArgs),
    /// Hand facts to Ansible: write setup facts into its jsonfile fact cache.
    #[command(subcommand)]
    Ansible(ansible_cmd::AnsibleCommand),
    /// Print the Kubernetes manifests `run --kubernetes` would apply (YAML; -o json: a List).
    Gen(kube_cmd::GenArgs),
    /// Delete what Kubernetes runs made: every object with the run's label, cluster-scoped too.
    Delete(kube_cmd::DeleteArgs),
    /// Print a shell completion script, e.g. `factbuoy completions bash > /etc/bash_completion.d/factbuoy`.
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the tokio runtime");
    match runtime.block_on(execute(cli.command, cli.format)) {
        Ok(outcome) => outcome.into(),
        Err(e) => {
            report_error(&e, cli.format);
            ExitStatus::InvalidInput.into()
        }
    }
}

async fn execute(command: Command, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        Command::Run(args) => run_cmd::run(args, format).await,
        Command::Status(args) => run_cmd::status(args, format).await,
        Command::Retrieve(args) => run_cmd::retrieve(args, format).await,
        Command::Plugin(command) => plugin_cmd::execute(command, format).await,
        Command::Aggregator(command) => aggregator_cmd::aggregator(command, format).await,
        Command::Agent(args) => aggregator_cmd::agent(args, format).await,
        Command::Ansible(command) => ansible_cmd::execute(command, format).await,
        Command::Gen(args) => kube_cmd::gen_cmd(args, format).await,
        Command::Delete(args) => kube_cmd::delete_cmd(args, format).await,
        Command::Completions { shell } => {
            clap_complete::generate(
                shell,
                &mut Cli::command(),
                "factbuoy",
                &mut std::io::stdout(),
            );
            Ok(ExitStatus::Success)
        }
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("FACTBUOY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colours only on a terminal: escape sequences in a log file or a pipe are noise.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .init();
}
