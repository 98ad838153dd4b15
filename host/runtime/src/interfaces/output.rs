//! `output`: artifacts streamed from the plugin into the invocation's sink, with names checked,
//! sizes and digests recorded, and the output limit enforced.

use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;
use wasmtime::component::Resource;

use crate::bindings::OpenArtifact;
use crate::bindings::factbuoy::plugin::output::{self, OutputError};
use crate::instance::InstanceState;
use crate::instance::output::{ArtifactRecord, OpenWriter};
use crate::violation::Violation;
use factbuoy_protocol::names::ArtifactName;

impl output::Host for InstanceState {
    async fn create(
        &mut self,
        name: String,
        media_type: String,
    ) -> wasmtime::Result<Result<Resource<OpenArtifact>, OutputError>> {
        self.check_call_size("output.create", name.len() + media_type.len())?;
        // Limits the plugin is told about: it may stop, but the run fails either way.
        let refusal = if self.output.open.len() >= self.limits.open_artifacts {
            Some(Violation::OpenArtifacts(self.limits.open_artifacts))
        } else {
            self.charge_metadata(name.len() + media_type.len()).err()
        };
        if let Some(violation) = refusal {
            let message = violation.to_string();
            self.violation.get_or_insert(violation);
            return Ok(Err(OutputError::LimitExceeded(message)));
        }
        let name = match ArtifactName::parse(&name) {
            Ok(name) => name,
            Err(e) => return Ok(Err(OutputError::InvalidName(e.to_string()))),
        };
        if !self.output.names.insert(name.clone()) {
            return Ok(Err(OutputError::InvalidName(format!(
                "artifact name {:?} is already used in this run",
                name.as_str()
            ))));
        }
        if let Err(e) = self.output.unpacked.insert(&name) {
            self.output.names.remove(&name);
            return Ok(Err(OutputError::InvalidName(e.to_string())));
        }
        let writer = match self.output.sink.create(&name, &media_type) {
            Ok(writer) => writer,
            Err(e) => return Ok(Err(OutputError::Io(format!("creating {name}: {e}")))),
        };
        let key_check = self.output.key_check(&name);
        self.output.records.push(ArtifactRecord {
            name,
            media_type,
            size_bytes: 0,
            sha256: None,
            truncated: false,
            error: None,
        });
        let record = self.output.records.len() - 1;
        self.output.open.insert(
            record,
            OpenWriter {
                writer,
                hasher: Sha256::new(),
                key_check,
            },
        );
        Ok(Ok(self.table.push(OpenArtifact { record })?))
    }
}

impl output::HostArtifact for InstanceState {
    async fn write(
        &mut self,
        handle: Resource<OpenArtifact>,
        chunk: Vec<u8>,
    ) -> wasmtime::Result<Result<(), OutputError>> {
        self.check_call_size("artifact.write", chunk.len())?;
        let limit = self.limits.output_bytes;
        let room = limit.saturating_sub(self.output.written_bytes);
        let kept = &chunk[..chunk.len().min(room as usize)];
        let index = self.table.get(&handle)?.record;
        let record = &mut self.output.records[index];
        let Some(open) = self.output.open.get_mut(&index) else {
            return Ok(Err(OutputError::Closed));
        };
        if let Err(e) = open.writer.write_all(kept).await {
            record.error = Some(e.to_string());
            return Ok(Err(OutputError::Io(format!(
                "writing {}: {e}",
                record.name
            ))));
        }
        open.hasher.update(kept);
        if let Some(check) = &mut open.key_check {
            check.feed(kept, &mut self.output.facts_budget);
        }
        record.size_bytes += kept.len() as u64;
        self.output.written_bytes += kept.len() as u64;
        if kept.len() < chunk.len() {
            record.truncated = true;
            let violation = Violation::Output(limit);
            let message = violation.to_string();
            self.violation.get_or_insert(violation);
            return Ok(Err(OutputError::LimitExceeded(message)));
        }
        Ok(Ok(()))
    }

    async fn finish(
        &mut self,
        handle: Resource<OpenArtifact>,
    ) -> wasmtime::Result<Result<(), OutputError>> {
        let index = self.table.get(&handle)?.record;
        Ok(self.output.finish(index).await)
    }

    async fn drop(&mut self, handle: Resource<OpenArtifact>) -> wasmtime::Result<()> {
        let index = self.table.delete(handle)?.record;
        if self.output.open.contains_key(&index) {
            // A failure is already noted in the artifact's record.
            let _ = self.output.finish(index).await;
        }
        Ok(())
    }
}
