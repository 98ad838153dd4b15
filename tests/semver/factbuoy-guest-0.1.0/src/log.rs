//! Log records, shown by the host with the plugin's name attached.

use crate::__bindings::factbuoy::plugin::logging::{self as wit, Level};

/// Detailed tracing, hidden unless the operator asks for it.
pub fn trace(message: &str) {
    wit::log(Level::Trace, message);
}
/// Diagnostics for plugin authors.
pub fn debug(message: &str) {
    wit::log(Level::Debug, message);
}
/// Normal operation.
pub fn info(message: &str) {
    wit::log(Level::Info, message);
}
/// Something is off but the plugin carries on.
pub fn warn(message: &str) {
    wit::log(Level::Warn, message);
}
/// Something failed.
pub fn error(message: &str) {
    wit::log(Level::Error, message);
}
