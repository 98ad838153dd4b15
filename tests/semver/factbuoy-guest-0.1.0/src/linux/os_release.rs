//! `os-release(5)`: `KEY=value` lines with shell quoting. The parser is `factbuoy-linux`'s,
//! shared with the host's `host-info`.

use std::collections::BTreeMap;

pub use factbuoy_linux::os_release::{PATHS, parse};

use crate::hostfs::HostFs;

/// Reads the first os-release file that exists: its path and variables.
pub fn read(fs: &HostFs) -> std::io::Result<(&'static str, BTreeMap<String, String>)> {
    let mut last_error = None;
    for path in PATHS {
        match fs.read_to_string(path) {
            Ok(text) => return Ok((path, parse(&text))),
            Err(e) => last_error = Some(e),
        }
    }
    Err(last_error.expect("PATHS is not empty"))
}
