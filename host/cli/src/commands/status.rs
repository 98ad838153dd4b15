//! `factbuoy status`: a run's status, the current run's or the one named, of any kind; with
//! `--web`, the same live in a browser (factbuoy-watch).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use factbuoy_operator::follow::Source;
use factbuoy_operator::list::{self, Listed};
use factbuoy_operator::{StateDir, WhichRun};
use factbuoy_present::summary;

use crate::flags::WhichRunArgs;
use crate::output::{ExitStatus, Format, emit, emit_document};

#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  factbuoy status\n  factbuoy status 3f2a9c01d4e7 -o json\n  factbuoy status --run-dir ./my-run\n  factbuoy status --web                       # live in a browser, at the URL it prints\n  factbuoy status --web --listen 127.0.0.1:8765\n  factbuoy status --web --out bundles/        # where the page's retrieve button downloads\n  factbuoy status --web --listen 10.0.0.5:8443 --tls-cert page.pem --tls-key page.key"
)]
pub struct StatusArgs {
    #[command(flatten)]
    run: WhichRunArgs,
    /// Serve the status live to a browser on this host, at the URL printed (with its token), until Ctrl-C: the run's page, and every run of this machine.
    #[arg(long, conflicts_with = "run_dir")]
    web: bool,
    /// With --web: the address to serve on; port 0 picks a free one. Another than loopback needs --tls-cert and --tls-key.
    #[arg(
        long,
        value_name = "ADDR",
        requires = "web",
        default_value = "127.0.0.1:0"
    )]
    listen: SocketAddr,
    /// With --web: where the page's "retrieve" button downloads a finished run's bundle, as `factbuoy retrieve --out`.
    #[arg(long, value_name = "DIR", requires = "web", default_value = ".")]
    out: PathBuf,
    /// With --web: serve HTTPS with this certificate (PEM, then any intermediates); needed to listen on an address that is not loopback. It must name that address.
    #[arg(long, value_name = "FILE", requires_all = ["web", "tls_key"])]
    tls_cert: Option<PathBuf>,
    /// With --web: the key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires_all = ["web", "tls_cert"])]
    tls_key: Option<PathBuf>,
}

pub async fn status(args: StatusArgs, format: Format) -> anyhow::Result<ExitStatus> {
    let state = StateDir::from_env()?;
    if args.web {
        return web(args, state, format).await;
    }
    let which = args.run.which();
    let record = state.locate(&which)?;
    if matches!(which, WhichRun::Current) {
        say_which(&state, record.run_id()).await;
    }
    let source = Source::of(&record, &state, &args.run.cluster.cluster()).await?;
    let document = source.status().await?;
    match format {
        Format::Table => emit(&summary::text(&document, source.bundle_dir().as_deref())),
        machine => emit_document(&document, machine),
    }
    Ok(ExitStatus::Success)
}

/// `status --web`: serves until Ctrl-C, having printed the URL of the run named (the current
/// one without a run id), or of the list of runs when there is no current run.
async fn web(args: StatusArgs, state: StateDir, format: Format) -> anyhow::Result<ExitStatus> {
    let which = args.run.which();
    let path = match state.locate(&which) {
        Ok(record) => format!("/runs/{}", record.run_id()),
        Err(_) if matches!(which, WhichRun::Current) => "/".to_owned(),
        Err(e) => return Err(e.into()),
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => {
            let read = |path: &PathBuf| {
                std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
            };
            Some(factbuoy_watch::TlsIdentity {
                cert_pem: read(cert)?,
                key_pem: read(key)?,
            })
        }
        _ => None,
    };
    // Heard from here on: a SIGTERM right after the address is printed stops it cleanly.
    let stop = crate::signals::interrupted();
    let server = factbuoy_watch::serve(factbuoy_watch::PageOptions {
        listen: args.listen,
        state,
        cluster: args.run.cluster.cluster(),
        out: args.out,
        tls,
    })
    .await?;
    let url = server.url(&path);
    match format {
        Format::Table => emit(&url),
        machine => emit_document(&serde_json::json!({ "url": url }), machine),
    }
    eprintln!(
        "serving the status page on {}; Ctrl-C stops it",
        server.address()
    );
    let signal = stop.await;
    tracing::debug!("{signal}: the status page stops");
    Ok(ExitStatus::Success)
}

/// Says which run `status` shows when more than one local run is going: the current one, the
/// one started last, which need not be the one the operator has in mind.
async fn say_which(state: &StateDir, current: &str) {
    let Ok(runs) = list::list(state, &Default::default(), false).await else {
        return;
    };
    let going = |run: &&Listed| run.kind == "local" && run.may_be_going() && run.note.is_none();
    let going = runs.iter().filter(going).count();
    if going > 1 {
        eprintln!(
            "note: {going} runs are going on this host; this is the current one, {current}, the one started last; `factbuoy runs` lists them, `factbuoy status RUN-ID` shows another"
        );
    }
}
