//! The fleet bundle behind `bench/inspect.sh` and `bench/package.sh`: a run of many nodes with
//! journal results, built from one real local run's bundle and written by the real writer.
//!
//! ```text
//! bench-bundle generate TEMPLATE WORK NODES JOURNAL_BYTES
//!     TEMPLATE: an extracted bundle of `factbuoy run --plugin host-facts --plugin setup`.
//!     Writes WORK/tree (the results tree the aggregator would hold: facts, journal.jsonl and
//!     reports of every node) and WORK/meta (run.json, status.json, definitions).
//! bench-bundle package WORK OUT_DIR
//!     Writes the bundle of WORK through `factbuoy_bundle::writer::write` and prints its path.
//! ```
//!
//! Every node's facts are the template's with its own hostname, addresses, machine id and
//! memory, product uuid and serial, host keys, MAC addresses and time of asking, and a tenth of
//! the nodes run another distribution version, so `query` and `diff` have something to show and
//! the report's pages are no smaller than a real fleet's. Journal lines have the shape and the entropy of `journalctl -o json`
//! (cursors, ids, timestamps, varied messages): gzip shrinks them about 5 times, as real ones.

mod common;

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use factbuoy_bundle::writer;
use factbuoy_protocol::types::StatusDocument;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use common::{node_name, random_base64, read_json, uuid, with_new_macs};

const FACT_PLUGINS: [(&str, &str); 2] = [
    ("setup", "ansible_facts.json"),
    ("host-facts", "host-facts.json"),
];
const JOURNAL_PLUGIN: &str = "systemd-logs";
const JOURNAL_FILE: &str = "journal.jsonl";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["generate", template, work, nodes, journal_bytes] => generate(
            Path::new(template),
            Path::new(work),
            nodes.parse().context("NODES")?,
            journal_bytes.parse().context("JOURNAL_BYTES")?,
        ),
        ["package", work, out] => {
            let (path, info) = package(Path::new(work), Path::new(out))?;
            println!("{} {} {}", path.display(), info.size, info.sha256);
            Ok(())
        }
        _ => bail!(
            "usage: bench-bundle generate TEMPLATE WORK NODES JOURNAL_BYTES | package WORK OUT_DIR"
        ),
    }
}

fn write_json(path: &Path, value: &Value) -> anyhow::Result<()> {
    std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
    std::fs::write(path, serde_json::to_vec(value)?)?;
    Ok(())
}

fn generate(template: &Path, work: &Path, nodes: usize, journal_bytes: u64) -> anyhow::Result<()> {
    let template_node = {
        let results = template.join("plugins/setup/results");
        let first = std::fs::read_dir(&results)
            .with_context(|| format!("reading {}", results.display()))?
            .next()
            .context("the template has no setup result")??;
        first.file_name().to_string_lossy().into_owned()
    };
    let facts: Vec<Value> = FACT_PLUGINS
        .iter()
        .map(|(plugin, file)| {
            read_json(&template.join(format!("plugins/{plugin}/results/{template_node}/{file}")))
        })
        .collect::<anyhow::Result<_>>()?;
    let run = read_json(&template.join("meta/run.json"))?;
    let status = read_json(&template.join("meta/status.json"))?;
    let tree = work.join("tree");
    let meta = work.join("meta");

    let names: Vec<String> = (0..nodes).map(node_name).collect();
    // Each node's journal fails on one node in a hundred: the summary has errors to show.
    let failed = |index: usize| index % 100 == 7;

    let mut run = run;
    run["nodes"] = json!(names);
    if let Some(plugins) = run["plugins"].as_array_mut()
        && !plugins.iter().any(|p| p["name"] == JOURNAL_PLUGIN)
    {
        let mut journal = plugins[0].clone();
        journal["name"] = json!(JOURNAL_PLUGIN);
        journal["definition"] = json!({ "name": JOURNAL_PLUGIN, "version": "0.1.0" });
        plugins.push(journal);
    }
    write_json(&meta.join("run.json"), &run)?;

    let template_pairs = status["plugins"].as_array().context("status.plugins")?;
    let mut pairs = Vec::new();
    for (plugin, _) in FACT_PLUGINS.iter().chain([&(JOURNAL_PLUGIN, JOURNAL_FILE)]) {
        let template_pair = template_pairs
            .iter()
            .find(|p| p["plugin"] == *plugin)
            .unwrap_or(&template_pairs[0]);
        for (index, name) in names.iter().enumerate() {
            let mut pair = template_pair.clone();
            pair["plugin"] = json!(plugin);
            pair["node"] = json!(name);
            if let Some(progress) = pair.get_mut("progress").and_then(Value::as_object_mut) {
                progress.insert("plugin".into(), json!(plugin));
                progress.insert("node".into(), json!(name));
            }
            if *plugin == JOURNAL_PLUGIN && failed(index) {
                pair["result_status"] = json!("failed");
            }
            pairs.push(pair);
        }
    }
    let mut status = status;
    status["plugins"] = json!(pairs);
    let status_document: StatusDocument =
        serde_json::from_value(status.clone()).context("the status document")?;
    write_json(
        &meta.join("status.json"),
        &serde_json::to_value(&status_document)?,
    )?;
    for plugin in ["setup", "host-facts"] {
        let definition = template.join(format!("plugins/{plugin}/definition.json"));
        write_json(
            &meta.join(format!("definitions/{plugin}.json")),
            &read_json(&definition)?,
        )?;
    }
    write_json(
        &meta.join(format!("definitions/{JOURNAL_PLUGIN}.json")),
        &json!({ "name": JOURNAL_PLUGIN, "version": "0.1.0",
                  "description": "the journal, as journalctl -o json writes it" }),
    )?;
    let report = read_json(&template.join(format!("meta/reports/setup/{template_node}.json")))?;

    // Two writers: generation is bound by formatting the journal lines.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|worker| {
                let (facts, report, names, tree) = (&facts, &report, &names, &tree);
                scope.spawn(move || -> anyhow::Result<()> {
                    for index in (worker..names.len()).step_by(threads) {
                        let name = &names[index];
                        let mut rng = StdRng::seed_from_u64(index as u64);
                        let node_facts = vary(&facts[0], &facts[1], index, name, &mut rng);
                        for ((plugin, file), document) in FACT_PLUGINS.iter().zip(node_facts) {
                            write_json(
                                &tree.join(format!("plugins/{plugin}/results/{name}/{file}")),
                                &document,
                            )?;
                            let mut report = report.clone();
                            report["plugin"] = json!(plugin);
                            write_json(
                                &tree.join(format!("meta/reports/{plugin}/{name}.json")),
                                &report,
                            )?;
                        }
                        if failed(index) {
                            write_json(
                                &tree.join(format!(
                                    "plugins/{JOURNAL_PLUGIN}/errors/{name}/error.json"
                                )),
                                &json!({
                                    "error": format!("plugin \"{JOURNAL_PLUGIN}\" 0.1.0: the journal of {name} is unreadable: Permission denied"),
                                    "plugin_version": "0.1.0",
                                }),
                            )?;
                        } else {
                            let path = tree.join(format!(
                                "plugins/{JOURNAL_PLUGIN}/results/{name}/{JOURNAL_FILE}"
                            ));
                            journal(&path, name, journal_bytes, &mut rng)?;
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .try_for_each(|w| w.join().expect("a generator thread panicked"))
    })?;
    Ok(())
}

/// The template's facts with this node's own names, addresses, ids and memory.
fn vary(setup: &Value, host: &Value, index: usize, name: &str, rng: &mut StdRng) -> [Value; 2] {
    let short = name.split('.').next().unwrap_or(name);
    let address = format!(
        "10.{}.{}.{}",
        index / 65536,
        index / 256 % 256,
        index % 256 + 1
    );
    let machine_id = format!("{:032x}", rng.random::<u128>());
    let memory_mb: u64 = [16_384, 32_768, 65_536][index % 3];
    let free_mb = rng.random_range(1_000..memory_mb / 2);
    let version = if index % 10 == 3 { "12.10" } else { "12.11" };

    let mut setup = setup.clone();
    setup["ansible_hostname"] = json!(short);
    setup["ansible_nodename"] = json!(name);
    setup["ansible_fqdn"] = json!(name);
    setup["ansible_machine_id"] = json!(machine_id);
    setup["ansible_all_ipv4_addresses"] = json!([address]);
    setup["ansible_default_ipv4"]["address"] = json!(address);
    setup["ansible_memtotal_mb"] = json!(memory_mb);
    setup["ansible_memfree_mb"] = json!(free_mb);
    setup["ansible_uptime_seconds"] = json!(rng.random_range(3_600..9_000_000u64));
    setup["ansible_distribution_version"] = json!(version);
    // What is a machine's own in real facts, so that a fleet's facts are no more alike than a
    // real fleet's: its ids, host keys, hardware addresses and the time it was asked.
    setup["ansible_product_uuid"] = json!(uuid(rng));
    setup["ansible_product_serial"] = json!(format!("{:016x}", rng.random::<u64>()));
    if let Some(facts) = setup.as_object_mut() {
        for (key, value) in facts.iter_mut() {
            if key.starts_with("ansible_ssh_host_key_")
                && let Some(text) = value.as_str()
            {
                *value = json!(random_base64(text.len(), rng));
            }
        }
    }
    with_new_macs(&mut setup, rng);
    let epoch = 1_790_000_000 + rng.random_range(0..600u64);
    if let Some(time) = setup["ansible_date_time"].as_object_mut() {
        time.insert("epoch".into(), json!(epoch.to_string()));
        time.insert("epoch_int".into(), json!(epoch.to_string()));
        time.insert("second".into(), json!(format!("{:02}", epoch % 60)));
        time.insert("minute".into(), json!(format!("{:02}", epoch / 60 % 60)));
    }

    let mut host = host.clone();
    host["host"]["hostname"] = json!(short);
    host["host"]["machine_id"] = json!(machine_id);
    host["memory"]["total_bytes"] = json!(memory_mb << 20);
    host["memory"]["free_bytes"] = json!(free_mb << 20);
    host["os"]["version_id"] = json!(&version[..2]);
    if let Some(address_entry) = host["network"]["interfaces"][0]["addresses"][0].as_object_mut() {
        address_entry.insert("address".into(), json!(address));
    }
    [setup, host]
}

const WORDS: &[&str] = &[
    "started",
    "stopped",
    "failed",
    "connection",
    "accepted",
    "closed",
    "request",
    "served",
    "in",
    "ms",
    "user",
    "session",
    "opened",
    "for",
    "root",
    "from",
    "port",
    "ssh2",
    "kernel",
    "audit",
    "apparmor",
    "DENIED",
    "operation",
    "reload",
    "timeout",
    "retrying",
    "listening",
    "on",
    "address",
    "ready",
    "health",
    "check",
    "passed",
    "mount",
    "unit",
    "entered",
    "state",
    "dead",
    "active",
    "deactivated",
    "successfully",
    "consumed",
    "CPU",
    "time",
    "memory",
];

/// About `bytes` of journal lines as `journalctl -o json` writes them for one node.
fn journal(path: &Path, node: &str, bytes: u64, rng: &mut StdRng) -> anyhow::Result<()> {
    std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let seqnum_id = format!("{:032x}", rng.random::<u128>());
    let boot_id = format!("{:032x}", rng.random::<u128>());
    let machine_id = format!("{:032x}", rng.random::<u128>());
    let units: Vec<String> = (0..40).map(|n| format!("unit-{n:02}.service")).collect();
    let mut realtime: u64 = 1_795_000_000_000_000 + rng.random_range(0..1_000_000_000);
    let mut monotonic: u64 = rng.random_range(1_000_000..100_000_000);
    let mut written = 0u64;
    let mut line = String::with_capacity(4096);
    let mut seqnum: u64 = rng.random_range(1..1_000_000);
    while written < bytes {
        line.clear();
        let step = rng.random_range(1..2_000_000);
        realtime += step;
        monotonic += step;
        seqnum += 1;
        let unit = &units[rng.random_range(0..units.len())];
        let pid = rng.random_range(1..4_000_000u32);
        let priority = [3, 4, 5, 6, 6, 6, 6, 7][rng.random_range(0..8)];
        let mut message = String::new();
        let _ = write!(message, "{unit}: request #{seqnum} ");
        for _ in 0..rng.random_range(4..30) {
            message.push_str(WORDS[rng.random_range(0..WORDS.len())]);
            message.push(' ');
        }
        let _ = write!(
            message,
            "trace={:032x} span={:016x} client=10.{}.{}.{}:{} bytes={} took {}ms",
            rng.random::<u128>(),
            rng.random::<u64>(),
            rng.random::<u8>(),
            rng.random::<u8>(),
            rng.random::<u8>(),
            rng.random_range(1024..65535),
            rng.random_range(0..10_000_000),
            rng.random_range(0..5000)
        );
        let _ = write!(
            line,
            "{{\"__CURSOR\":\"s={seqnum_id};i={seqnum:x};b={boot_id};m={monotonic:x};t={realtime:x};x={:016x}\",\
             \"__REALTIME_TIMESTAMP\":\"{realtime}\",\"__MONOTONIC_TIMESTAMP\":\"{monotonic}\",\
             \"_BOOT_ID\":\"{boot_id}\",\"__SEQNUM\":\"{seqnum}\",\"__SEQNUM_ID\":\"{seqnum_id}\",\
             \"_TRANSPORT\":\"stdout\",\"PRIORITY\":\"{priority}\",\"SYSLOG_FACILITY\":\"3\",\
             \"SYSLOG_IDENTIFIER\":\"{ident}\",\"_PID\":\"{pid}\",\"_UID\":\"0\",\"_GID\":\"0\",\
             \"_COMM\":\"{ident}\",\"_EXE\":\"/usr/sbin/{ident}\",\"_CMDLINE\":\"/usr/sbin/{ident} --serve\",\
             \"_CAP_EFFECTIVE\":\"1ffffffffff\",\"_SYSTEMD_CGROUP\":\"/system.slice/{unit}\",\
             \"_SYSTEMD_UNIT\":\"{unit}\",\"_SYSTEMD_SLICE\":\"system.slice\",\
             \"_SYSTEMD_INVOCATION_ID\":\"{:032x}\",\"_MACHINE_ID\":\"{machine_id}\",\
             \"_HOSTNAME\":\"{node}\",\"_STREAM_ID\":\"{:032x}\",\"MESSAGE\":\"{message}\",\
             \"_SOURCE_REALTIME_TIMESTAMP\":\"{}\"}}",
            rng.random::<u64>(),
            rng.random::<u128>() & 0xffff_u128,
            rng.random::<u128>() & 0xff_u128,
            realtime - rng.random_range(1..50),
            ident = unit.trim_end_matches(".service"),
        );
        line.push('\n');
        out.write_all(line.as_bytes())?;
        written += line.len() as u64;
    }
    out.flush()?;
    Ok(())
}

fn package(
    work: &Path,
    out: &Path,
) -> anyhow::Result<(PathBuf, factbuoy_protocol::types::TarInfo)> {
    let meta = work.join("meta");
    let run = read_json(&meta.join("run.json"))?;
    let status: StatusDocument = serde_json::from_value(read_json(&meta.join("status.json"))?)?;
    let mut definitions = Vec::new();
    for entry in std::fs::read_dir(meta.join("definitions"))? {
        let path = entry?.path();
        let plugin = path
            .file_stem()
            .context("a definition's name")?
            .to_string_lossy()
            .into_owned();
        definitions.push((plugin, read_json(&path)?));
    }
    definitions.sort_by(|a, b| a.0.cmp(&b.0));
    let run_id = status.run_id.clone();
    writer::write(
        &writer::Meta {
            run_id: &run_id,
            run: &run,
            status: &status,
            definitions: definitions.iter().map(|(p, d)| (p.as_str(), d)).collect(),
        },
        &work.join("tree"),
        out,
    )
}
