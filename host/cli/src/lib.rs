//! The `factbuoy` command line: argument parsing and printing only. What the commands do lives
//! in the library crates under host/ (docs/architecture.md): one module per command in
//! `commands/`, none importing another; flag groups several commands share in `flags`; the
//! output format, JSON and exit codes in `output`; how things look to people in factbuoy-present.
//!
//! Exit codes: see [`output::EXIT_CODES`], which `--help` prints.
//!
//! This library exists for the binary (`src/main.rs` calls [`main`]) and for the binary's own
//! tests of its command tree (tests/all, through [`command`]). It promises no API: nothing but
//! the binary and its tests may depend on it.

mod commands;
mod fact_cache;
mod flags;
mod logging;
mod output;
mod pruning;
mod signals;

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

use commands::{
    agent, aggregator, ansible, delete, fleet, generate, inspect, plugin, prune, retrieve, run,
    runs, status, version,
};
use output::{EXIT_CODES, ExitStatus, Format, emit_with, exit_status_of, report_error};

/// Examples, then the exit codes, after `factbuoy --help`.
fn after_help() -> String {
    format!(
        "\
Examples:
  factbuoy run                                  # collect this host's facts into a bundle
  factbuoy run --plugin setup -p setup:gather_subset=network
  factbuoy status -o json                       # the current run, for machines
  factbuoy run --kubernetes --context prod      # every node of a cluster
  factbuoy plugin run hello -p hello:greeting=hi

{EXIT_CODES}"
    )
}

/// factbuoy gathers facts about hosts with sandboxed WebAssembly gatherer plugins.
#[derive(Debug, Parser)]
#[command(
    name = "factbuoy",
    version,
    propagate_version = true,
    max_term_width = 100,
    after_help = after_help(),
)]
struct Cli {
    /// Output format: a table for people, json or yaml for machines.
    #[arg(short = 'o', long = "output", global = true, value_enum, default_value_t = Format::Table)]
    format: Format,

    /// More log output (-v info, -vv debug with timestamps, -vvv trace). FACTBUOY_LOG overrides it.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Collect facts from this host: an aggregator on loopback, an agent over mutual TLS, one bundle.
    #[command(after_help = "Examples:\n  \
        factbuoy run                                     # the default plugins, bundle here\n  \
        factbuoy run --plugin setup -p setup:gather_subset=network --out bundles/\n  \
        factbuoy run --plugin ./my.wasm --grant my-plugin:read:/etc\n  \
        factbuoy run --kubernetes --context prod         # every node of a cluster\n  \
        factbuoy run --kubernetes --agent-cache /data/factbuoy-cache --agent-cache-size 2GiB\n  \
        factbuoy run --kubernetes --no-agent-cache       # compile plugins again on every run\n\n\
        Ctrl-C ends the run: what was collected is packaged, the rest is marked interrupted.")]
    Run(run::RunArgs),
    /// Show a run's status: the current run's, or the one named (local or Kubernetes).
    Status(status::StatusArgs),
    /// List the runs this machine knows, of every kind, with their state; `*` marks the current one.
    Runs(runs::RunsArgs),
    /// Download a run's bundle, resuming a partial download (through port-forward for a Kubernetes run).
    Retrieve(retrieve::RetrieveArgs),
    /// List, inspect, validate and run gatherer plugins on this host; create and build new ones.
    #[command(
        subcommand,
        after_help = "Examples:\n  \
        factbuoy plugin list\n  \
        factbuoy plugin info setup\n  \
        factbuoy plugin run hello -p hello:greeting=hi\n  \
        factbuoy plugin new my-facts --lang python && cd my-facts && factbuoy plugin build"
    )]
    Plugin(plugin::PluginCommand),
    /// Create, serve and issue certificates for a run whose agents are separate processes.
    #[command(
        subcommand,
        after_help = "Examples:\n  \
        factbuoy aggregator create --run-dir ./run --node web-1 --listen 0.0.0.0:7443\n  \
        factbuoy aggregator issue --run-dir ./run --role agent:web-1 --out ./web-1-creds\n  \
        factbuoy aggregator serve --run-dir ./run --exit-when-complete"
    )]
    Aggregator(aggregator::AggregatorCommand),
    /// Run the plugins an aggregator's plan names on this node and send it the results; or join
    /// a fleet and serve it.
    #[command(
        args_conflicts_with_subcommands = true,
        subcommand_negates_reqs = true,
        after_help = "Examples:\n  \
        echo 0a1b2c3d4e5f.SECRET | \\\n      \
        factbuoy agent join fleet.example.com:7443 --token-file - --ca-pin sha256:...\n  \
        factbuoy agent serve\n  \
        factbuoy agent --aggregator 10.0.0.5:7443 --credentials ./web-1-creds --node web-1"
    )]
    Agent(agent::AgentCommand),
    /// A long-lived aggregator for machines outside any cluster: serve it, make join tokens,
    /// list and revoke nodes.
    #[command(
        subcommand,
        after_help = "Examples:\n  \
        factbuoy fleet serve --dir /var/lib/factbuoy-fleet --listen 0.0.0.0:7443 --name fleet.example.com\n  \
        factbuoy fleet token create --ttl 1h\n  \
        factbuoy fleet nodes\n  \
        factbuoy run --fleet fleet.example.com:7443"
    )]
    Fleet(fleet::FleetCommand),
    /// Hand facts to Ansible: write setup facts into its jsonfile fact cache.
    #[command(
        subcommand,
        after_help = "Examples:\n  \
        factbuoy ansible fact-cache ./facts --from run.tar.gz"
    )]
    Ansible(ansible::AnsibleCommand),
    /// Read a run's bundle offline: verify, summarise, query, compare, search its logs, export,
    /// report.
    #[command(
        subcommand,
        after_help = "Examples:\n  \
        factbuoy inspect verify run.tar.gz\n  \
        factbuoy inspect summary run.tar.gz\n  \
        factbuoy inspect facts run.tar.gz web-1\n  \
        factbuoy inspect query run.tar.gz 'ansible_mounts[*].mount'\n  \
        factbuoy inspect sql run.tar.gz \"SELECT node, facts->>'ansible_kernel' FROM setup\"\n  \
        factbuoy inspect diff last-month.tar.gz today.tar.gz\n  \
        factbuoy inspect logs run.tar.gz --node web-1 --unit sshd --priority warning\n  \
        factbuoy inspect export run.tar.gz --format csv --out ./export\n  \
        factbuoy inspect report run.tar.gz --out report.html"
    )]
    Inspect(inspect::InspectCommand),
    /// Print the Kubernetes manifests `run --kubernetes` would apply (YAML; -o json: a List).
    Gen(generate::GenArgs),
    /// Delete what Kubernetes runs made: every object with the run's label, cluster-scoped too.
    Delete(delete::DeleteArgs),
    /// Remove the state of finished local runs: their directories and the current-run record.
    Prune(prune::PruneArgs),
    /// Print this binary's version, the plugin contract it speaks and its bundled plugins.
    #[command(after_help = "Examples:\n  factbuoy version\n  factbuoy version -o json")]
    Version,
    /// Print a shell completion script; it completes subcommands, flags and bundled plugin names.
    #[command(after_help = "Examples:\n  \
        factbuoy completions bash > /etc/bash_completion.d/factbuoy\n  \
        factbuoy completions zsh > \"${fpath[1]}/_factbuoy\"")]
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page of factbuoy or of one of its commands (roff, from the same definition
    /// as --help), or write them all with --dir.
    #[command(after_help = "Examples:\n  factbuoy man | man -l -\n  \
        factbuoy man inspect summary | man -l -\n  \
        factbuoy man --dir /usr/local/share/man/man1    # factbuoy.1, factbuoy-run.1, ...")]
    Man(commands::man::ManArgs),
}

/// The whole command tree as clap builds it, for the binary's tests.
pub fn command() -> clap::Command {
    Cli::command()
}

/// The binary: parses the arguments, runs the command, prints its error, returns its exit code.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init(cli.verbose);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("starting the tokio runtime");
    match runtime.block_on(execute(cli.command, cli.format)) {
        Ok(outcome) => outcome.into(),
        Err(e) => {
            report_error(&e, cli.format);
            exit_status_of(&e).into()
        }
    }
}

async fn execute(command: Command, format: Format) -> anyhow::Result<ExitStatus> {
    match command {
        Command::Run(args) => run::run(args, format).await,
        Command::Status(args) => status::status(args, format).await,
        Command::Runs(args) => runs::runs(args, format).await,
        Command::Retrieve(args) => retrieve::retrieve(args, format).await,
        Command::Plugin(command) => plugin::execute(command, format).await,
        Command::Aggregator(command) => aggregator::aggregator(command, format).await,
        Command::Agent(command) => agent::agent_command(command, format).await,
        Command::Fleet(command) => fleet::execute(command, format).await,
        Command::Ansible(command) => ansible::execute(command, format).await,
        Command::Inspect(command) => inspect::execute(command, format),
        Command::Gen(args) => generate::generate(args, format).await,
        Command::Delete(args) => delete::delete_cmd(args, format).await,
        Command::Prune(args) => prune::prune(args, format),
        Command::Version => version::version(format).await,
        Command::Completions { shell } => {
            // Generated in memory: clap_complete panics when a write fails (`| head -1`).
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "factbuoy", &mut script);
            emit_with(|out| out.write_all(&script));
            Ok(ExitStatus::Success)
        }
        Command::Man(args) => commands::man::man(args, Cli::command(), format),
    }
}
