//! Every limit the sandbox enforces, with its default, in one place.
//!
//! All of them apply together to each plugin run; a run that crosses one ends with an error that
//! names the limit and its value, and the host carries on with the next plugin.

use std::time::Duration;

/// Default wall-clock deadline for one plugin run, from instantiation to the end of `gather`.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(300);
/// Default cap on a plugin's linear memory.
pub const DEFAULT_MEMORY_BYTES: u64 = 512 << 20;
/// Default cap on the wasm stack. Engine-wide: it is fixed when the runtime is created.
pub const DEFAULT_STACK_BYTES: usize = 1 << 20;
/// Default cap on the bytes of all artifacts of one run together.
pub const DEFAULT_OUTPUT_BYTES: u64 = 4 << 30;
/// Default cap on captured stdout and, separately, stderr. The overflow is dropped, not an error.
pub const DEFAULT_CAPTURED_STDIO_BYTES: usize = 1 << 20;
/// Default cap on the data one host call may carry (an artifact chunk, a log message, a progress
/// update). A call above it fails with an error naming the limit.
pub const DEFAULT_HOST_CALL_BYTES: usize = 1 << 20;
/// Default cap on the log records and progress warnings kept for the report, in bytes. Past it
/// records are counted and dropped.
pub const DEFAULT_RECORDED_LOG_BYTES: usize = 1 << 20;
/// Default cap on the metadata one run hands the host: the text of every artifact name and
/// media type, progress report, warning, error and log record (and the plugin's description),
/// each record also counting [`RECORD_OVERHEAD_BYTES`]. The call that crosses it fails: `create`
/// with `limit-exceeded`, the others by ending the run; either way the run fails naming it.
pub const DEFAULT_METADATA_BYTES: usize = 16 << 20;
/// What each record (an artifact, a progress report, a log record) counts against the metadata
/// budget beyond its text, so that a flood of empty records is bounded too.
pub const RECORD_OVERHEAD_BYTES: usize = 64;
/// Default cap on artifacts open (created and not finished) at once.
pub const DEFAULT_OPEN_ARTIFACTS: usize = 64;
/// Default cap on table elements (function references) a plugin may create.
pub const DEFAULT_TABLE_ELEMENTS: usize = 1 << 20;
/// How often the epoch ticks: the granularity of the deadline and of yielding to other tasks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// The limits of one plugin run. `Default` gives the documented defaults above.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Limits {
    /// Wall-clock time from instantiation to the end of `gather`.
    pub deadline: Duration,
    /// Largest size of each linear memory, in bytes.
    pub memory_bytes: u64,
    /// Largest wasm stack, in bytes; engine-wide, so only the runtime's own value counts.
    pub stack_bytes: usize,
    /// Bytes of all artifacts of the run together; past it artifacts are cut short.
    pub output_bytes: u64,
    /// Bytes of stdout, and separately of stderr, kept for the report.
    pub captured_stdio_bytes: usize,
    /// Bytes one host call may carry.
    pub host_call_bytes: usize,
    /// Bytes of log records, warnings and errors kept for the report.
    pub recorded_log_bytes: usize,
    /// Largest number of elements of each table.
    pub table_elements: usize,
    /// Bytes of metadata (names, media types, progress, warnings, errors, logs) one run may hand
    /// the host in all.
    pub metadata_bytes: usize,
    /// Artifacts open at once.
    pub open_artifacts: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline: DEFAULT_DEADLINE,
            memory_bytes: DEFAULT_MEMORY_BYTES,
            stack_bytes: DEFAULT_STACK_BYTES,
            output_bytes: DEFAULT_OUTPUT_BYTES,
            captured_stdio_bytes: DEFAULT_CAPTURED_STDIO_BYTES,
            host_call_bytes: DEFAULT_HOST_CALL_BYTES,
            recorded_log_bytes: DEFAULT_RECORDED_LOG_BYTES,
            table_elements: DEFAULT_TABLE_ELEMENTS,
            metadata_bytes: DEFAULT_METADATA_BYTES,
            open_artifacts: DEFAULT_OPEN_ARTIFACTS,
        }
    }
}
