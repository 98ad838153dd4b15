//! The data of a plugin instance's store, [`InstanceState`]: its WASI context, the limits being
//! enforced, and the record of what the plugin did (its artifacts, `output`; what it said,
//! `progress`), which becomes the invocation's report. The host side of each interface, in
//! `interfaces`, is implemented on it; nothing here depends on those implementations.

mod declared_keys;
pub mod output;
pub mod progress;

use std::path::PathBuf;
use std::sync::Arc;

use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use crate::capture::CaptureStream;
use crate::fsguard::FsGuard;
use crate::limits::{Limits, RECORD_OVERHEAD_BYTES};
use crate::violation::Violation;
use output::OutputState;
use progress::ProgressState;

/// The data of one plugin instance's store; host interfaces are implemented on it.
pub struct InstanceState {
    pub(crate) wasi: WasiCtx,
    pub(crate) table: ResourceTable,
    pub(crate) limits: Limits,
    pub(crate) host_info_granted: bool,
    /// The host directory that guest `/` maps onto (`--root`): `host-info` answers about the
    /// system below it, as the preopens show it.
    pub(crate) host_root: PathBuf,
    /// The granted read paths that were mapped (preopened), normalised guest paths. `host-fs`
    /// reveals nothing outside them.
    pub(crate) read_paths: Vec<String>,
    /// What every path the plugin opens is checked against (`fsguard`).
    pub(crate) fs_guard: FsGuard,
    /// When the run's deadline passes: host calls that wait give up by then.
    pub(crate) deadline_at: std::time::Instant,
    pub(crate) output: OutputState,
    pub(crate) progress: ProgressState,
    pub(crate) stdout: CaptureStream,
    pub(crate) stderr: CaptureStream,
    /// The first limit crossed, which decides the failure even if the plugin then returned
    /// normally.
    pub(crate) violation: Option<Violation>,
    pub(crate) plugin: Arc<str>,
    /// Bytes of metadata counted against `limits.metadata_bytes` so far.
    pub(crate) metadata_spent: usize,
}

/// What a run may reach on the host, as granted: the `host-info` capability, and the read
/// paths mapped below the host root.
pub(crate) struct Access {
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
    pub(crate) fn violate(&mut self, violation: Violation) -> wasmtime::Error {
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

impl InstanceState {
    /// Refuses a call whose data is above the per-call limit.
    pub(crate) fn check_call_size(
        &mut self,
        call: &'static str,
        size: usize,
    ) -> wasmtime::Result<()> {
        let limit = self.limits.host_call_bytes;
        if size > limit {
            return Err(self.violate(Violation::HostCall { call, size, limit }));
        }
        Ok(())
    }
}

impl InstanceState {
    /// Counts one record carrying `text_bytes` of plugin-controlled text against the run's
    /// metadata budget. Once the budget is crossed it stays crossed: every later record is
    /// refused too, so nothing more reaches the report or a relay.
    pub(crate) fn charge_metadata(&mut self, text_bytes: usize) -> Result<(), Violation> {
        let limit = self.limits.metadata_bytes;
        self.metadata_spent = self
            .metadata_spent
            .saturating_add(text_bytes.saturating_add(RECORD_OVERHEAD_BYTES));
        if self.metadata_spent > limit {
            return Err(Violation::Metadata(limit));
        }
        Ok(())
    }
}
