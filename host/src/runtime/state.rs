//! What one plugin instance's store holds: its WASI context, the limits being enforced and the
//! record of what it did (artifacts, progress, logs), which becomes the run's report.

use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capture::CaptureStream;
use super::host::output::OutputState;
use super::host::progress::ProgressState;
use super::limits::Limits;
use super::violation::Violation;

pub struct RunState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limits: Limits,
    pub(super) host_info_granted: bool,
    pub(super) output: OutputState,
    pub(super) progress: ProgressState,
    pub(super) stdout: CaptureStream,
    pub(super) stderr: CaptureStream,
    /// The first limit crossed, which decides the failure even if the plugin then returned
    /// normally.
    pub(super) violation: Option<Violation>,
    pub(super) plugin: Arc<str>,
}

impl RunState {
    /// Records `violation` if it is the first, and returns it as an error to trap with.
    pub(super) fn violate(&mut self, violation: Violation) -> wasmtime::Error {
        self.violation.get_or_insert_with(|| violation.clone());
        wasmtime::Error::new(violation)
    }
}

impl WasiView for RunState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl ResourceLimiter for RunState {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let limit = self.limits.memory_bytes;
        if desired as u64 > limit {
            return Err(self.violate(Violation::Memory {
                limit,
                desired: desired as u64,
            }));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let limit = self.limits.table_elements;
        if desired > limit {
            return Err(self.violate(Violation::Table { limit, desired }));
        }
        Ok(true)
    }
}
