//! The `fs-…` modes: every way a plugin could name a path to read what it must not, or to hang
//! the host. Each reports what it got in `probe.json`, contents included, so a test can look
//! there for a secret.
//!
//! - `fs-proc`: the memory, environment, descriptors and magic links of factbuoy (`/proc/self`),
//!   of its parent and of process 1, through WASI opens, `readlink` and `host-fs.read-link`.
//! - `fs-read`: reads each of the comma-separated `path`s (a FIFO, a socket, a device...).
//! - `fs-usage`: asks `filesystem-usage` about `path` repeated `count` times.

use std::io::{Read, Seek, SeekFrom};

use factbuoy_guest::prelude::*;
use serde_json::{Map, Value, json};

/// At most this much of each file is kept in the probe.
const KEEP_BYTES: usize = 64 << 10;

pub fn run(mode: &str, path: &str, count: i64) -> Result<(), GatherError> {
    let probe = match mode {
        "fs-proc" => proc_escape(),
        "fs-read" => Value::Object(path.split(',').map(|p| (p.to_owned(), read(p))).collect()),
        "fs-usage" => {
            let paths = vec![path.to_owned(); count.max(0) as usize];
            let answers = host_info::filesystem_usage(&paths);
            json!({
                "answers": answers.len(),
                "answered": answers.iter().filter(|a| a.is_some()).count(),
            })
        }
        other => {
            return Err(GatherError::InvalidParameters(format!(
                "unknown mode `{other}`"
            )));
        }
    };
    output::write_json("probe.json", &probe)
}

/// Opens and reads `path` as `std::fs::read` would, keeping the start of what it gets.
fn read(path: &str) -> Value {
    match std::fs::File::open(path) {
        Ok(mut file) => {
            let mut bytes = Vec::new();
            match (&mut file).take(KEEP_BYTES as u64).read_to_end(&mut bytes) {
                Ok(_) => json!({"read": String::from_utf8_lossy(&bytes)}),
                Err(e) => json!({"opened": true, "error": e.to_string()}),
            }
        }
        Err(e) => json!({"error": e.to_string()}),
    }
}

fn readlink(path: &str) -> Value {
    let wasi = match std::fs::read_link(path) {
        Ok(target) => json!({"target": target.to_string_lossy()}),
        Err(e) => json!({"error": e.to_string()}),
    };
    let host = match factbuoy_guest::__bindings::factbuoy::plugin::host_fs::read_link(path) {
        Ok(target) => json!({"target": target}),
        Err(e) => json!({"error": format!("{e:?}")}),
    };
    json!({"wasi": wasi, "host-fs": host})
}

fn list(path: &str) -> Value {
    match std::fs::read_dir(path) {
        Ok(entries) => json!({
            "entries": entries
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
        }),
        Err(e) => json!({"error": e.to_string()}),
    }
}

/// Reads `/proc/<pid>/mem` where the stack is, as `/proc/<pid>/stat` (or `maps`) tells.
fn read_memory(pid: &str) -> Value {
    let stack = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            // Field 28, `startstack`, counted after the parenthesised command name.
            let after = stat.rsplit_once(')')?.1;
            after.split_whitespace().nth(25)?.parse::<u64>().ok()
        });
    let mut file = match std::fs::File::open(format!("/proc/{pid}/mem")) {
        Ok(file) => file,
        Err(e) => return json!({"error": e.to_string(), "startstack": stack}),
    };
    let Some(stack) = stack else {
        return json!({"opened": true, "error": "no stack address"});
    };
    let start = stack.saturating_sub(KEEP_BYTES as u64);
    let mut bytes = vec![0u8; 2 * KEEP_BYTES];
    let read = file
        .seek(SeekFrom::Start(start))
        .and_then(|_| file.read(&mut bytes));
    match read {
        Ok(n) => json!({"read": String::from_utf8_lossy(&bytes[..n])}),
        Err(e) => json!({"opened": true, "error": e.to_string()}),
    }
}

fn proc_escape() -> Value {
    let parent = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("PPid:"))
                .map(|p| p.trim().to_owned())
        })
        .unwrap_or_else(|| "1".to_owned());
    let mut seen = Map::new();
    for pid in ["self", "thread-self", parent.as_str(), "1"] {
        let dir = format!("/proc/{pid}");
        seen.insert(format!("{dir}/mem"), read_memory(pid));
        for file in [
            "environ",
            "cmdline",
            "auxv",
            "maps",
            "smaps",
            "stack",
            "syscall",
            "io",
            "pagemap",
            "status",
            "fdinfo/0",
            "fd/0",
            "fd/1",
            "fd/2",
            "fd/3",
            "cwd/.",
            "root/etc/hostname",
            "exe",
        ] {
            seen.insert(format!("{dir}/{file}"), read(&format!("{dir}/{file}")));
        }
        for link in [
            "cwd", "root", "exe", "fd/0", "fd/1", "fd/2", "fd/3", "ns/mnt",
        ] {
            seen.insert(
                format!("readlink {dir}/{link}"),
                readlink(&format!("{dir}/{link}")),
            );
        }
        for listed in ["fd", "map_files", "task", ""] {
            seen.insert(
                format!("list {dir}/{listed}"),
                list(&format!("{dir}/{listed}")),
            );
        }
    }
    let tids: Vec<String> = seen["list /proc/self/task"]["entries"]
        .as_array()
        .map(|tids| {
            tids.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    for tid in tids.iter().take(4) {
        let path = format!("/proc/self/task/{tid}/environ");
        seen.insert(path.clone(), read(&path));
    }
    for file in [
        "kcore",
        "kmsg",
        "kallsyms",
        "keys",
        "sysrq-trigger",
        "kpageflags",
    ] {
        seen.insert(format!("/proc/{file}"), read(&format!("/proc/{file}")));
    }
    Value::Object(seen)
}
