//! Test fixture: a plugin that tries, on request, every misbehaviour the sandbox must contain.
//!
//! `mode` picks the misbehaviour; `path` is the file or directory the filesystem modes aim at.
//! Modes that probe the sandbox (reads, writes, sockets) report what happened in `probe.json`
//! instead of failing, so a test can assert the exact outcome.

mod budget_modes;

use std::io::Write;

mod fs_modes;

use factbuoy_guest::prelude::*;

struct Hostile;

impl Gatherer for Hostile {
    fn describe() -> Description {
        Description::new(
            "hostile",
            "0.1.0",
            "Misbehaves on purpose, to test the sandbox.",
        )
        .param(Param::string("mode").required().describe(
            "well-behaved | nothing | loop | alloc | recurse | recurse-shadow | flood | panic | fail | read | list | \
                 write | connect | host-info | host-root | read-link | hostfs-read | stdout-flood | \
                 log-flood | huge-chunk | stream | progress | bad-name | udp | resolve | process | fs-proc | fs-read | fs-usage | \
                 budget-… (see budget_modes.rs)",
        ))
        .param(
            Param::string("path").default("/").describe(
                "Target of read, list, write, read-link and hostfs-read; comma-separated mount \
                 points for host-root.",
            ),
        )
        .param(
            Param::integer("count")
                .default("1")
                .describe("How many times to repeat."),
        )
        .param(
            Param::string("token")
                .default("")
                .secret()
                .describe("A secret for mode budget-secret."),
        )
        .optional_capability(Capability::HostInfo, "mode host-info")
        .optional_capability(Capability::read("/data"), "modes read, list and write")
        .optional_capability(Capability::read("/"), "the fs-… modes (fs_modes.rs)")
        .writes(Artifact::facts("probe.json", "what a probe saw"))
    }

    fn gather(params: &Params) -> Result<(), GatherError> {
        let path = params.string("path")?;
        match params.string("mode")? {
            "well-behaved" => output::write_json("probe.json", &serde_json::json!({"ok": true})),
            // Succeeds without an artifact: nothing was there to collect.
            "nothing" => Ok(()),
            "loop" => {
                let mut n: u64 = 0;
                loop {
                    n = std::hint::black_box(n.wrapping_add(1));
                }
            }
            "alloc" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 1 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "recurse" => {
                std::hint::black_box(recurse(std::hint::black_box(1)));
                Ok(())
            }
            "recurse-shadow" => {
                std::hint::black_box(recurse_with_frames(std::hint::black_box(1)));
                Ok(())
            }
            "flood" => {
                let mut out = output::create("flood.bin", "application/octet-stream")?;
                let block = vec![b'x'; 64 * 1024];
                loop {
                    out.write_all(&block).map_err(output::into_gather_error)?;
                }
            }
            // Streams numbered lines into an artifact, one every 10 ms, until stopped.
            "stream" => {
                let mut out = output::create("stream.txt", "text/plain")?;
                for line in 0u64.. {
                    out.write_all(format!("line {line}\n").as_bytes())
                        .map_err(output::into_gather_error)?;
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Ok(())
            }
            // Reports step i of `count`, one every 300 ms, then succeeds: a slow plugin whose
            // progress a watcher sees change (tests/all/status_web.rs).
            "progress" => {
                let count = params.integer("count")?.max(1) as u64;
                for step in 0..count {
                    progress::report(step, count, &format!("step {} of {count}", step + 1));
                    std::thread::sleep(std::time::Duration::from_millis(300));
                }
                progress::report(count, count, "done");
                output::write_json("probe.json", &serde_json::json!({"steps": count}))
            }
            "stdout-flood" => {
                let line = "y".repeat(1023);
                for _ in 0..params.integer("count")? {
                    println!("{line}");
                    eprintln!("{line}");
                }
                output::write_json("probe.json", &serde_json::json!({"ok": true}))
            }
            "log-flood" => {
                for i in 0..params.integer("count")? {
                    log::info(&format!("log line {i}"));
                    progress::warn(&format!("warning {i}"));
                }
                output::write_json("probe.json", &serde_json::json!({"ok": true}))
            }
            "huge-chunk" => {
                let mut out = output::create("huge.bin", "application/octet-stream")?;
                // Bypass the SDK's chunking: one call far above the host's per-call limit.
                let result = factbuoy_guest::__bindings::factbuoy::plugin::output::create(
                    "raw.bin",
                    "application/octet-stream",
                )?
                .write(&vec![0u8; 8 << 20]);
                out.write_all(b"small").map_err(output::into_gather_error)?;
                probe(serde_json::json!({"result": format!("{result:?}")}))
            }
            "bad-name" => {
                // A name the next ones collide with where the bundle is unpacked.
                let _twin = output::create("case/twin.txt", "text/plain");
                let names = [
                    "../escape.json",
                    "/etc/passwd",
                    "a/../../b",
                    "",
                    "a\\b",
                    "ok/../x",
                    // The aggregator's own file beside a failed result's artifacts.
                    "error.json",
                    // Unsafe on Windows, or invisible.
                    "CON",
                    "a.json:stream",
                    "evil\u{202e}nosj.exe",
                    // One path on macOS and Windows; a file where a directory is needed.
                    "CASE/Twin.TXT",
                    "case/twin.txt/x",
                    "Case",
                ];
                let results: Vec<String> = names
                    .iter()
                    .map(|n| match output::create(n, "text/plain") {
                        Ok(_) => format!("{n}: accepted"),
                        Err(e) => format!("{n}: {}", output::message(&e)),
                    })
                    .collect();
                probe(serde_json::json!({"results": results}))
            }
            mode if mode.starts_with("budget-") => budget_modes::gather(mode, params),
            "panic" => panic!("hostile plugin panicked on purpose"),
            "fail" => Err(GatherError::Failed("failed on purpose".into())),
            "read" => probe(match std::fs::read(path) {
                Ok(bytes) => serde_json::json!({"read": String::from_utf8_lossy(&bytes)}),
                Err(e) => serde_json::json!({"error": e.to_string()}),
            }),
            "list" => probe(match std::fs::read_dir(path) {
                Ok(entries) => {
                    let mut names: Vec<String> = entries
                        .filter_map(|e| e.ok())
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    names.sort();
                    serde_json::json!({"entries": names})
                }
                Err(e) => serde_json::json!({"error": e.to_string()}),
            }),
            "write" => {
                let outcomes = [
                    std::fs::write(path, b"written by a plugin").map(|_| "wrote"),
                    std::fs::create_dir(format!("{path}.d")).map(|_| "created directory"),
                    std::fs::remove_file(path).map(|_| "removed"),
                ];
                let outcomes: Vec<String> = outcomes
                    .into_iter()
                    .map(|r| r.map_or_else(|e| format!("error: {e}"), str::to_owned))
                    .collect();
                probe(serde_json::json!({"outcomes": outcomes}))
            }
            "connect" => probe(match std::net::TcpStream::connect(path) {
                Ok(_) => serde_json::json!({"connected": true}),
                Err(e) => serde_json::json!({"error": e.to_string()}),
            }),
            "udp" => probe(match std::net::UdpSocket::bind("0.0.0.0:0") {
                Ok(socket) => match socket.send_to(b"escaped", path) {
                    Ok(_) => serde_json::json!({"sent": true}),
                    Err(e) => serde_json::json!({"error": format!("sending: {e}")}),
                },
                Err(e) => serde_json::json!({"error": format!("binding: {e}")}),
            }),
            "resolve" => probe(match std::net::ToSocketAddrs::to_socket_addrs(path) {
                Ok(found) => {
                    let found: Vec<String> = found.map(|a| a.to_string()).collect();
                    serde_json::json!({"resolved": found})
                }
                Err(e) => serde_json::json!({"error": e.to_string()}),
            }),
            "process" => {
                let mut stdin = Vec::new();
                let read = std::io::Read::read_to_end(&mut std::io::stdin(), &mut stdin);
                probe(serde_json::json!({
                    "env": std::env::vars().map(|(k, _)| k).collect::<Vec<_>>(),
                    "args": std::env::args().collect::<Vec<_>>(),
                    "stdin": read.map_or_else(|e| format!("error: {e}"), |n| format!("{n} bytes")),
                }))
            }
            "host-info" => probe(serde_json::json!({"hostname": host_info::os().hostname})),
            "host-root" => {
                let os = host_info::os();
                let points: Vec<String> = path.split(',').map(str::to_owned).collect();
                let usage: Vec<Option<u64>> = host_info::filesystem_usage(&points)
                    .into_iter()
                    .map(|u| u.map(|u| u.blocks_total))
                    .collect();
                let disks: Vec<String> = host_info::disks()
                    .into_iter()
                    .map(|d| {
                        format!(
                            "{} {} {} {}",
                            d.name,
                            d.mount_point,
                            d.file_system,
                            d.total_bytes > 0
                        )
                    })
                    .collect();
                probe(serde_json::json!({
                    "name": os.name,
                    "version": os.version,
                    "distribution_id": os.distribution_id,
                    "markers": host_info::existing_markers(),
                    "is_chroot": host_info::is_chroot(),
                    "usage_blocks": usage,
                    "disks": disks,
                    "tz": host_info::tz_variable(),
                }))
            }
            // The host call itself, bypassing the SDK.
            "read-link" => probe(
                match factbuoy_guest::__bindings::factbuoy::plugin::host_fs::read_link(path) {
                    Ok(target) => serde_json::json!({"target": target}),
                    Err(e) => serde_json::json!({"error": format!("{e:?}")}),
                },
            ),
            // Through the SDK, which resolves links the way plugins do.
            "hostfs-read" => probe(
                match factbuoy_guest::hostfs::HostFs::new().read_to_string(path) {
                    Ok(text) => serde_json::json!({"read": text}),
                    Err(e) => serde_json::json!({"error": e.to_string()}),
                },
            ),
            fs if fs.starts_with("fs-") => fs_modes::run(fs, path, params.integer("count")?),
            other => Err(GatherError::InvalidParameters(format!(
                "unknown mode `{other}`"
            ))),
        }
    }
}

fn probe(value: serde_json::Value) -> Result<(), GatherError> {
    output::write_json("probe.json", &value)
}

/// Recurses without end on the wasm stack itself, which the host limits.
#[inline(never)]
#[allow(unconditional_recursion, clippy::only_used_in_recursion)] // recursing without end is the point
fn recurse(depth: u64) -> u64 {
    std::hint::black_box(recurse(depth + 1)) + 1
}

/// Recurses without end with frames kept in linear memory (Rust's shadow stack), which runs
/// out below address 0 before the wasm stack does.
#[inline(never)]
#[allow(unconditional_recursion, clippy::only_used_in_recursion)] // recursing without end is the point
fn recurse_with_frames(depth: u64) -> u64 {
    let frame = std::hint::black_box([depth; 16]);
    recurse_with_frames(depth + 1) + frame[(depth % 16) as usize]
}

export_gatherer!(Hostile);
