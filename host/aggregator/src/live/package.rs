//! Packaging: once every pair has a result, the run's results tree becomes its bundle, and the
//! run ends complete (or failed, when it was interrupted or the bundle could not be written).

use std::sync::Arc;

use anyhow::Context;
use factbuoy_protocol::types::now_rfc3339;

use super::shared::Shared;
use crate::persistence::files::is_disk_full;

/// Writes the bundle and completes the run: first finishes any recorded commit not yet in
/// place, and removes what an earlier packaging left (a `.partial` from a stop).
pub(crate) async fn package(shared: &Arc<Shared>) {
    // Every result is in: no plan will be handed out again, so the secrets go.
    shared.forget_secrets();
    let document = shared
        .state
        .lock()
        .unwrap()
        .bundle_document(&shared.config.run_id);
    let worker = shared.clone();
    let written = tokio::task::spawn_blocking(move || {
        let state = worker.state.lock().unwrap().clone();
        worker
            .results
            .recover(&state)
            .context("moving recorded results into place")?;
        factbuoy_bundle::writer::remove_earlier(&worker.config.bundle_dir, &worker.config.run_id)?;
        let public_config = worker.config.without_secrets();
        let meta = factbuoy_bundle::writer::Meta {
            run_id: &worker.config.run_id,
            run: &public_config,
            status: &document,
            definitions: worker
                .config
                .plugins
                .iter()
                .map(|p| (p.name.as_str(), &p.definition))
                .collect(),
        };
        factbuoy_bundle::writer::write(
            &meta,
            worker.results.bundle_root(),
            &worker.config.bundle_dir,
        )
    })
    .await;
    let error = match written {
        Ok(Ok((path, tar_info))) => {
            tracing::info!(bundle = %path.display(), "run complete");
            let mut state = shared.state.lock().unwrap();
            state.tar_info = Some(tar_info);
            state.finished = Some(now_rfc3339());
            state.error = state.final_error();
            state.status = state.final_status();
            shared.save_state(&state);
            return;
        }
        Ok(Err(e)) => {
            let full = e
                .chain()
                .filter_map(|c| c.downcast_ref::<std::io::Error>())
                .any(is_disk_full);
            let hint = if full {
                format!(
                    "; the disk holding {} or {} is full. Every committed result is intact in the run directory",
                    shared.config.bundle_dir.display(),
                    shared.run_dir.root().display()
                )
            } else {
                String::new()
            };
            format!("writing the bundle failed: {e:#}{hint}")
        }
        Err(e) => format!("the bundle writer crashed: {e}"),
    };
    shared.fail_run(error);
}
