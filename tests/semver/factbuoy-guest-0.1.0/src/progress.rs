//! Progress reports: shown by `factbuoy plugin run` and relayed to a run's status.

use crate::__bindings::factbuoy::plugin::progress::{self as wit, ProgressUpdate};

/// Reports that `completed` of `total` units are done (`total` 0 when unknown).
pub fn report(completed: u64, total: u64, message: &str) {
    send(completed, total, message, Vec::new(), Vec::new());
}

/// Reports a problem that did not stop the plugin, for example a file it could not read.
pub fn warn(message: &str) {
    send(0, 0, "", vec![message.to_owned()], Vec::new());
}

/// Reports a problem that means part of the output is missing.
pub fn error(message: &str) {
    send(0, 0, "", Vec::new(), vec![message.to_owned()]);
}

fn send(completed: u64, total: u64, message: &str, warnings: Vec<String>, errors: Vec<String>) {
    wit::report(&ProgressUpdate {
        completed,
        total,
        message: message.to_owned(),
        warnings,
        errors,
    });
}
