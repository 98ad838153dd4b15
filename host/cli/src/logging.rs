//! Log output on stderr, as a person reads it: `warning: ...` lines without timestamps or
//! targets at the default level (timestamps from -vv on, where ordering matters), colour only
//! on a terminal, and printed above a progress bar rather than through it.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use factbuoy_protocol::types::StatusDocument;
use indicatif::ProgressBar;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::registry::LookupSpan;

/// The progress bar on screen, if any: log lines suspend it while they print.
static BAR: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Installs the subscriber: `verbose` 0 shows warnings, 1 info, 2 debug, 3 trace;
/// `FACTBUOY_LOG` (an EnvFilter) overrides it.
pub fn init(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    // A registry's untrusted certificate is logged by the verifier as well as reported by the
    // command's error, which says what to do about it.
    let filter = tracing_subscriber::EnvFilter::try_from_env("FACTBUOY_LOG").unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{default},rustls_platform_verifier=off"))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(AboveTheBar)
        // Colours only on a terminal: escape sequences in a log file or a pipe are noise.
        .with_ansi(std::io::stderr().is_terminal());
    if verbose >= 2 {
        builder.with_target(false).init();
    } else {
        builder.event_format(Plain).init();
    }
}

/// A run's progress bar ([`factbuoy_present::summary::progress_bar`]), shown until
/// [`hide_bar`] when `show`.
pub fn progress_bar(document: &StatusDocument, show: bool) -> ProgressBar {
    let bar = factbuoy_present::summary::progress_bar(document, show);
    if show {
        show_bar(&bar);
    }
    bar
}

/// Shows `bar` until [`hide_bar`]: log lines print above it meanwhile.
pub fn show_bar(bar: &ProgressBar) {
    *BAR.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
}

/// Clears the bar [`show_bar`] showed, so that nothing of it stays above what follows.
pub fn hide_bar() {
    if let Some(bar) = BAR.lock().unwrap_or_else(|e| e.into_inner()).take() {
        bar.finish_and_clear();
    }
}

/// `level: message key=value`, the way compilers and package managers print diagnostics.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        context: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            Level::DEBUG => "debug",
            Level::TRACE => "trace",
        };
        if writer.has_ansi_escapes() {
            let colour = match *event.metadata().level() {
                Level::ERROR => "31",
                Level::WARN => "33",
                _ => "2",
            };
            write!(writer, "\x1b[{colour}m{level}\x1b[0m: ")?;
        } else {
            write!(writer, "{level}: ")?;
        }
        context
            .field_format()
            .format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Writes each log line to stderr whole, with the progress bar (if any) suspended meanwhile.
struct AboveTheBar;

impl<'a> MakeWriter<'a> for AboveTheBar {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line(Vec::new())
    }
}

/// One log line, buffered until it is complete.
struct Line(Vec<u8>);

impl Write for Line {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        // A log line that cannot be written (stderr closed) is dropped: it must not end the run.
        let print = || {
            let _ = std::io::stderr().write_all(&self.0);
        };
        match BAR.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            Some(bar) => bar.suspend(print),
            None => print(),
        }
    }
}
