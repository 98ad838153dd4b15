//! What one plugin instance's store holds: its WASI context, the limits being enforced and the
//! record of what it did (artifacts, progress, logs), which becomes the run's report.

use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::capture::CaptureStream;
use super::interfaces::output::OutputState;
use super::interfaces::progress::ProgressState;
use super::limits::Limits;
use super::violation::Violation;

/// The data of one plugin instance's store; host interfaces are implemented on it.
pub struct InstanceState {
    pub(super) wasi: WasiCtx,
    pub(super) table: ResourceTable,
    pub(super) limits: Limits,
    pub(super) host_info_granted: bool,
    /// The host directory that guest `/` maps onto (`--root`): `host-info` answers about the
    /// system below it, as the preopens show it.
    pub(super) host_root: PathBuf,
    /// The granted read paths that were mapped (preopened), normalised guest paths. `host-fs`
    /// reveals nothing outside them.
    pub(super) read_paths: Vec<String>,
    pub(super) output: OutputState,
    pub(super) progress: ProgressState,
    pub(super) stdout: CaptureStream,
    pub(super) stderr: CaptureStream,
    /// The first limit crossed, which decides the failure even if the plugin then returned
    /// normally.
    pub(super) violation: Option<Violation>,
    pub(super) plugin: Arc<str>,
}

/// What a run may reach on the host, as granted: the `host-info` capability, and the read
/// paths mapped below the host root.
pub(super) struct Access {
    pub host_info: bool,
    pub host_root: PathBuf,
    pub read_paths: Vec<String>,
}

impl Access {
    /// Nothing at all, for `describe`.
    pub fn none() -> Self {
        Access {
            host_info: false,
            host_root: PathBuf::from("/"),
            read_paths: Vec::new(),
        }
    }
}

impl InstanceState {
    /// Records `violation` if it is the first, and returns it as an error to trap with.
    pub(super) fn violate(&mut self, violation: Violation) -> wasmtime::Error {
        self.violation.get_or_insert_with(|| violation.clone());
        wasmtime::Error::new(violation)
    }
}

impl WasiView for InstanceState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl ResourceLimiter for InstanceState {
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
