//! The two bundles behind `bench/tables.sh`: a fleet whose custom plugin, `inventory`, writes a
//! table of installed packages (keyed by name) and a facts document with keyed lists, on two
//! days, written by the real writer.
//!
//! ```text
//! bench-tables WORK NODES ROWS
//!     Writes WORK/day1 and WORK/day2, each a results tree (tree/) and its bundle, and prints
//!     the two bundles' paths.
//! ```
//!
//! Day 2 is day 1 with the churn a day brings: on every node a few packages upgraded, one
//! removed and one installed, and on one node in ten a mount gone.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use factbuoy_bundle::writer;
use factbuoy_protocol::types::StatusDocument;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

const PLUGIN: &str = "inventory";

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [work, nodes, rows] = &args[..] else {
        bail!("usage: bench-tables WORK NODES ROWS");
    };
    let (work, nodes, rows): (&Path, usize, usize) = (
        Path::new(work),
        nodes.parse().context("NODES")?,
        rows.parse().context("ROWS")?,
    );
    for day in [1, 2] {
        let dir = work.join(format!("day{day}"));
        let _ = std::fs::remove_dir_all(&dir);
        let bundle = write_day(&dir, day, nodes, rows)?;
        println!("{}", bundle.display());
    }
    Ok(())
}

/// The plugin's definition: what the bundle says each artifact is.
fn definition() -> Value {
    json!({
        "name": PLUGIN, "version": "1.0.0", "description": "installed packages and mounts",
        "parameters": [], "capabilities": [],
        "artifacts": [
            {"name": "packages.jsonl", "media_type": "application/jsonl",
             "description": "one row per installed package", "kind": "table",
             "row_keys": ["name"]},
            {"name": "facts.json", "media_type": "application/json",
             "description": "the host and its mounts", "kind": "facts",
             "list_keys": [{"path": "mounts", "keys": ["mount_point"]}]},
        ],
    })
}

fn node_name(index: usize) -> String {
    format!("node-{index:04}.bench.example")
}

fn write_day(dir: &Path, day: u64, nodes: usize, rows: usize) -> anyhow::Result<PathBuf> {
    let tree = dir.join("tree");
    let mut pairs = Vec::new();
    for index in 0..nodes {
        let node = node_name(index);
        let results = tree.join(format!("plugins/{PLUGIN}/results/{node}"));
        std::fs::create_dir_all(&results)?;
        // The same packages on every node on day 1; each node's own churn on day 2.
        let mut churn = StdRng::seed_from_u64(index as u64);
        let mut out = BufWriter::new(std::fs::File::create(results.join("packages.jsonl"))?);
        for row in 0..rows {
            let mut version = format!("1.{}.{}", row % 17, row % 5);
            let upgraded = churn.random_bool(0.02);
            let removed = churn.random_bool(0.001);
            if day == 2 && upgraded {
                version.push_str("+deb12u1");
            }
            if day == 2 && removed {
                continue;
            }
            let package = json!({
                "name": format!("package-{row:05}"),
                "version": version,
                "architecture": if row % 9 == 0 { "all" } else { "amd64" },
                "section": format!("section-{}", row % 23),
                "installed_kb": 100 + (row * 37) % 90_000,
            });
            serde_json::to_writer(&mut out, &package)?;
            out.write_all(b"\n")?;
        }
        if day == 2 {
            let added = json!({"name": format!("package-new-{index}"), "version": "0.1.0",
                "architecture": "amd64", "section": "section-0", "installed_kb": 12});
            serde_json::to_writer(&mut out, &added)?;
            out.write_all(b"\n")?;
        }
        out.flush()?;
        let mounts: Vec<Value> = (0..10u64)
            .filter(|m| !(day == 2 && index % 10 == 0 && *m == 7))
            .map(|m| {
                json!({"mount_point": format!("/srv/{m}"), "fs": "ext4",
                           "size_bytes": (m + 1) * 1_000_000_000})
            })
            .collect();
        let facts = json!({"hostname": node, "kernel": "6.1.0-18-amd64", "mounts": mounts});
        std::fs::write(results.join("facts.json"), serde_json::to_vec(&facts)?)?;
        pairs.push(json!({"plugin": PLUGIN, "node": node, "status": "complete",
                          "result_status": "passed"}));
    }
    let run_id = format!("{day:012x}");
    let status: StatusDocument = serde_json::from_value(json!({
        "run_id": run_id, "status": "complete", "plugins": pairs,
    }))?;
    let run = json!({"run_id": run_id, "created": format!("2030-01-0{day}T00:00:00Z")});
    let definition = definition();
    let (bundle, _) = writer::write(
        &writer::Meta {
            run_id: &run_id,
            run: &run,
            status: &status,
            definitions: vec![(PLUGIN, &definition)],
        },
        &tree,
        dir,
    )?;
    Ok(bundle)
}
