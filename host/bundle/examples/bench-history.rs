//! The history behind `bench/history.sh`: a fleet's daily bundles, written by the real writer,
//! with the churn days bring, and every node snapshot's setup facts as JSON Lines for DuckDB.
//!
//! ```text
//! bench-history TEMPLATE WORK NODES DAYS
//!     TEMPLATE: an extracted bundle of `factbuoy run --plugin host-facts --plugin setup`
//!     (bench/fleet.sh makes it).
//!     Writes WORK/bundles/ (the bundles of days 0 to DAYS - 1), WORK/extra/ (day DAYS's: the
//!     one bundle added afterwards) and WORK/extracts/<date>.jsonl (a line per node snapshot in
//!     WORK/bundles: the node's setup facts with `run_id`, `created` and `node` added), and
//!     prints the bundles' paths in order, the extra one last. Each day's results tree, the
//!     bundle's input, is made and removed in TMPDIR.
//! ```
//!
//! Day D's run was created at 2026-03-01T02:00:00Z plus D days, by the fleet `bench-fleet`
//! (run.json's `origin`). A node's facts are the template's (setup and host-facts) with its own
//! names, addresses, ids, host keys and MAC addresses, as bench-bundle.rs varies them, and each
//! day its own time of asking, uptime, free memory and load, as real facts change. Its custom
//! plugin `inventory` writes a table of installed packages keyed by name.
//!
//! Each day (seeded, the same every time): one node in 200 is gone for good and about as many new
//! ones appear; one in 100 misses the day and is back the next; 3 in 100 change: a kernel
//! upgrade (a reboot onto the newest kernel released so far), a memory resize (a reboot too) or
//! a few packages upgraded. Node 42 ([`WATCHED`]) stays out of the dice: it reports every day
//! and upgrades its kernel on days DAYS/3 and 5·DAYS/6 (20 and 50 of 60), to the kernels
//! released on days DAYS/6 and 7·DAYS/12 (10 and 35).

mod common;

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use factbuoy_bundle::{layout, writer};
use factbuoy_protocol::types::StatusDocument;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use common::{node_name, random_base64, read_json, uuid, with_new_macs};
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

/// When day 0's run was created.
const START: OffsetDateTime = time::macros::datetime!(2026-03-01 02:00:00 UTC);
const ORIGIN: &str = "bench-fleet";
const INVENTORY: &str = "inventory";
/// Rows of each node's `inventory` packages table.
const PACKAGES: usize = 200;
/// The node whose kernel changes on known days.
const WATCHED: usize = 42;
/// Each day's odds, per node.
const VANISH: f64 = 0.005;
const APPEAR: f64 = 0.005;
const SKIP: f64 = 0.01;
const CHANGE: f64 = 0.03;

/// Debian 12's kernels, `(ansible_kernel, ansible_kernel_version)`: the first two installed
/// before day 0, the others released during the history ([`released`]).
const KERNELS: [(&str, &str); 4] = [
    (
        "6.1.0-27-amd64",
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.115-1 (2024-11-01)",
    ),
    (
        "6.1.0-28-amd64",
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.119-1 (2024-11-22)",
    ),
    (
        "6.1.0-29-amd64",
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.123-1 (2025-01-02)",
    ),
    (
        "6.1.0-31-amd64",
        "#1 SMP PREEMPT_DYNAMIC Debian 6.1.128-1 (2025-02-07)",
    ),
];
const MEMORY_MB: [u64; 3] = [16_384, 32_768, 65_536];

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [template, work, nodes, days] = &args[..] else {
        bail!("usage: bench-history TEMPLATE WORK NODES DAYS");
    };
    let (nodes, days): (usize, u32) = (
        nodes.parse().context("NODES")?,
        days.parse().context("DAYS")?,
    );
    if nodes <= WATCHED || days < 12 {
        bail!("NODES must be more than {WATCHED} and DAYS at least 12");
    }
    let template = Template::read(Path::new(template))?;
    let work = Path::new(work);
    for dir in ["bundles", "extra", "extracts"] {
        let _ = std::fs::remove_dir_all(work.join(dir));
    }
    // Each day's results tree is made in TMPDIR: thousands of small files, far quicker in memory
    // (bench/history.sh points it at /dev/shm) than on a disk.
    let temporary =
        tempfile::tempdir().context("making a temporary folder for the results tree")?;
    let tree = temporary.path().join("tree");
    let mut fleet = Fleet::new(nodes, days);
    for day in 0..=days {
        if day > 0 {
            fleet.churn(day);
        }
        let created = START + Duration::days(day.into());
        let (bundles, extract) = if day < days {
            let extract = work.join(format!("extracts/{}.jsonl", created.date()));
            (work.join("bundles"), Some(extract))
        } else {
            (work.join("extra"), None)
        };
        let bundle = fleet.write_day(&template, created, &tree, &bundles, extract.as_deref())?;
        std::fs::remove_dir_all(&tree)?;
        println!("{}", bundle.display());
    }
    eprintln!(
        "{} kernels: {}",
        node_name(WATCHED),
        fleet.watched_kernels.join(", ")
    );
    Ok(())
}

fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).expect("a time after the year 0")
}

/// What every day's bundle is made from: one real local run's facts, report and meta.
struct Template {
    setup: Value,
    host: Value,
    report: Value,
    run: Value,
    /// The status document's entry for each plugin (setup's stands in for inventory's).
    pairs: Vec<(&'static str, Value)>,
    definitions: Vec<(&'static str, Value)>,
}

impl Template {
    fn read(template: &Path) -> anyhow::Result<Template> {
        let results = template.join("plugins/setup/results");
        let node = std::fs::read_dir(&results)
            .with_context(|| format!("reading {}", results.display()))?
            .next()
            .context("the template has no setup result")??
            .file_name()
            .to_string_lossy()
            .into_owned();
        let status = read_json(&template.join("meta/status.json"))?;
        let template_pairs = status["plugins"].as_array().context("status.plugins")?;
        let pair = |plugin: &str| {
            template_pairs
                .iter()
                .find(|p| p["plugin"] == plugin)
                .unwrap_or(&template_pairs[0])
                .clone()
        };
        let definition = |plugin: &str| read_json(&template.join(layout::definition(plugin)));
        Ok(Template {
            setup: read_json(&results.join(format!("{node}/ansible_facts.json")))?,
            host: read_json(
                &template.join(format!("plugins/host-facts/results/{node}/host-facts.json")),
            )?,
            report: read_json(&template.join(format!("meta/reports/setup/{node}.json")))?,
            run: read_json(&template.join("meta/run.json"))?,
            pairs: vec![
                ("host-facts", pair("host-facts")),
                ("setup", pair("setup")),
                (INVENTORY, pair("setup")),
            ],
            definitions: vec![
                ("host-facts", definition("host-facts")?),
                (INVENTORY, inventory_definition()),
                ("setup", definition("setup")?),
            ],
        })
    }
}

/// The custom plugin's definition: a table of packages keyed by name.
fn inventory_definition() -> Value {
    json!({
        "name": INVENTORY, "version": "1.0.0", "description": "installed packages",
        "parameters": [], "capabilities": [],
        "artifacts": [
            {"name": "packages.jsonl", "media_type": "application/jsonl",
             "description": "one row per installed package", "kind": "table",
             "row_keys": ["name"]},
        ],
    })
}

/// What one node is, from one day to the next.
struct Node {
    index: usize,
    /// Into [`KERNELS`].
    kernel: usize,
    memory_mb: u64,
    /// When it last booted (Unix seconds).
    boot: i64,
    /// The kernel's id of its current boot.
    boot_id: String,
    /// Per package, how many upgrades it has had.
    upgrades: Vec<u8>,
}

impl Node {
    fn new(index: usize, day: u32, days: u32) -> Node {
        // Not the seed of its ids in [`facts`]: its uptime is no function of its machine id.
        let mut rng = StdRng::seed_from_u64(!(index as u64));
        let born = (START + Duration::days(day.into())).unix_timestamp();
        let (kernel, boot) = if day == 0 {
            // Up for hours to months, on last month's kernel or the one before.
            let kernel = if index.is_multiple_of(4) { 0 } else { 1 };
            (kernel, born - rng.random_range(3_600..9_000_000))
        } else {
            (newest(day, days), born - rng.random_range(600..3_600))
        };
        Node {
            index,
            kernel,
            memory_mb: MEMORY_MB[index % MEMORY_MB.len()],
            boot,
            boot_id: uuid(&mut rng),
            upgrades: vec![0; PACKAGES],
        }
    }

    fn reboot(&mut self, day: u32, rng: &mut StdRng) {
        let at = (START + Duration::days(day.into())).unix_timestamp();
        self.boot = at - rng.random_range(600..20_000);
        self.boot_id = uuid(rng);
    }
}

/// Whether kernel `k` has been released by `day`.
fn released(k: usize, day: u32, days: u32) -> bool {
    match k {
        0 | 1 => true,
        2 => day >= days / 6,
        _ => day >= days * 7 / 12,
    }
}

fn newest(day: u32, days: u32) -> usize {
    (0..KERNELS.len())
        .rev()
        .find(|&k| released(k, day, days))
        .unwrap_or(0)
}

struct Fleet {
    days: u32,
    nodes: Vec<Node>,
    /// Into `nodes`: who reports today.
    present: Vec<bool>,
    next_index: usize,
    /// The fleet's size on day 0: the odds of a new node are per node of it.
    initial: usize,
    rng: StdRng,
    /// The kernels the watched node has run, with the day each started.
    watched_kernels: Vec<String>,
}

impl Fleet {
    fn new(nodes: usize, days: u32) -> Fleet {
        let nodes: Vec<Node> = (0..nodes).map(|index| Node::new(index, 0, days)).collect();
        let watched = &nodes[WATCHED];
        let watched_kernels = vec![format!("{} from day 0", KERNELS[watched.kernel].0)];
        Fleet {
            days,
            present: vec![true; nodes.len()],
            next_index: nodes.len(),
            initial: nodes.len(),
            nodes,
            rng: StdRng::seed_from_u64(32),
            watched_kernels,
        }
    }

    /// The night before `day`: nodes vanish, miss the day, change, and new ones appear.
    fn churn(&mut self, day: u32) {
        let newest = newest(day, self.days);
        let rng = &mut self.rng;
        let mut kept = Vec::with_capacity(self.nodes.len());
        let mut present = Vec::with_capacity(self.nodes.len());
        for mut node in self.nodes.drain(..) {
            if node.index == WATCHED {
                if day == self.days / 3 || day == self.days * 5 / 6 {
                    node.kernel = newest;
                    node.reboot(day, rng);
                    self.watched_kernels
                        .push(format!("{} from day {day}", KERNELS[newest].0));
                }
                kept.push(node);
                present.push(true);
                continue;
            }
            if rng.random_bool(VANISH) {
                continue;
            }
            let skips = rng.random_bool(SKIP);
            if !skips && rng.random_bool(CHANGE) {
                match rng.random_range(0..3) {
                    0 if node.kernel < newest => {
                        node.kernel = newest;
                        node.reboot(day, rng);
                    }
                    1 => {
                        let size = MEMORY_MB.iter().position(|&mb| mb == node.memory_mb);
                        let other = (size.unwrap_or(0) + rng.random_range(1..MEMORY_MB.len()))
                            % MEMORY_MB.len();
                        node.memory_mb = MEMORY_MB[other];
                        node.reboot(day, rng);
                    }
                    _ => {
                        for _ in 0..rng.random_range(1..=3) {
                            let package = rng.random_range(0..PACKAGES);
                            node.upgrades[package] = node.upgrades[package].saturating_add(1);
                        }
                    }
                }
            }
            kept.push(node);
            present.push(!skips);
        }
        for _ in 0..self.initial {
            if rng.random_bool(APPEAR) {
                kept.push(Node::new(self.next_index, day, self.days));
                present.push(true);
                self.next_index += 1;
            }
        }
        self.nodes = kept;
        self.present = present;
    }

    /// Writes the day's results tree into `tree`, its bundle into `bundles` (named after the
    /// run's creation) and its setup facts into `extract`, and returns the bundle's path.
    fn write_day(
        &self,
        template: &Template,
        created: OffsetDateTime,
        tree: &Path,
        bundles: &Path,
        extract: Option<&Path>,
    ) -> anyhow::Result<PathBuf> {
        let run_id = format!(
            "{:012x}",
            StdRng::seed_from_u64(created.unix_timestamp() as u64).random::<u64>() >> 16
        );
        let created_text = rfc3339(created);
        let mut extract = match extract {
            Some(path) => {
                std::fs::create_dir_all(path.parent().expect("a file in a folder"))?;
                Some(BufWriter::new(std::fs::File::create(path)?))
            }
            None => None,
        };
        let day = (created - START).whole_days() as u64;
        let mut names = Vec::new();
        let mut pairs = Vec::new();
        for (node, _) in self.nodes.iter().zip(&self.present).filter(|(_, p)| **p) {
            let name = node_name(node.index);
            let mut rng = StdRng::seed_from_u64((node.index as u64) << 20 | day);
            let asked = created + Duration::seconds(rng.random_range(1..600));
            let [setup, host] = facts(template, node, &name, asked, &mut rng);
            let packages = packages(node);
            for (plugin, file, bytes) in [
                ("setup", "ansible_facts.json", serde_json::to_vec(&setup)?),
                ("host-facts", "host-facts.json", serde_json::to_vec(&host)?),
                (INVENTORY, "packages.jsonl", packages),
            ] {
                let dir = tree.join(layout::result_dir(
                    plugin,
                    &name,
                    layout::ResultKind::Results,
                ));
                std::fs::create_dir_all(&dir)?;
                std::fs::write(dir.join(file), &bytes)?;
                let mut report = template.report.clone();
                report["plugin"] = json!(plugin);
                report["source"] = json!(plugin);
                report["duration_ms"] = json!(rng.random_range(20.0..400.0));
                report["artifacts"] = json!([{
                    "media_type": if plugin == INVENTORY { "application/jsonl" } else { "application/json" },
                    "name": file,
                    "sha256": hex::encode(Sha256::digest(&bytes)),
                    "size_bytes": bytes.len(),
                    "truncated": false,
                }]);
                let reports = tree.join(format!("meta/reports/{plugin}"));
                std::fs::create_dir_all(&reports)?;
                std::fs::write(
                    reports.join(format!("{name}.json")),
                    serde_json::to_vec(&report)?,
                )?;
            }
            for (plugin, pair) in &template.pairs {
                let mut pair = pair.clone();
                let when = rfc3339(asked);
                pair["plugin"] = json!(plugin);
                pair["node"] = json!(name);
                pair["last_heartbeat"] = json!(when);
                if let Some(progress) = pair.get_mut("progress").and_then(Value::as_object_mut) {
                    progress.insert("plugin".into(), json!(plugin));
                    progress.insert("node".into(), json!(name));
                    progress.insert("timestamp".into(), json!(when));
                }
                pairs.push(pair);
            }
            if let Some(out) = extract.as_mut() {
                let mut line = setup;
                line["run_id"] = json!(run_id);
                line["created"] = json!(created_text);
                line["node"] = json!(name);
                serde_json::to_writer(&mut *out, &line)?;
                out.write_all(b"\n")?;
            }
            names.push(name);
        }
        if let Some(mut out) = extract {
            out.flush()?;
        }

        let mut run = template.run.clone();
        run["run_id"] = json!(run_id);
        run["created"] = json!(created_text);
        run["nodes"] = json!(names);
        run["origin"] = json!({"kind": "fleet", "id": ORIGIN});
        if let Some(plugins) = run["plugins"].as_array_mut()
            && !plugins.iter().any(|p| p["name"] == INVENTORY)
        {
            let mut inventory = plugins[0].clone();
            inventory["name"] = json!(INVENTORY);
            inventory["definition"] = inventory_definition();
            plugins.push(inventory);
        }
        let status: StatusDocument = serde_json::from_value(json!({
            "run_id": run_id, "status": "complete", "plugins": pairs,
        }))
        .context("the status document")?;
        let (written, _) = writer::write(
            &writer::Meta {
                run_id: &run_id,
                run: &run,
                status: &status,
                definitions: template.definitions.iter().map(|(p, d)| (*p, d)).collect(),
            },
            tree,
            bundles,
        )?;
        // The writer names a bundle after the time it is written; this one's run was created
        // on its day.
        let path = bundles.join(layout::file_name(&run_id, created));
        std::fs::rename(&written, &path)?;
        Ok(path)
    }
}

/// The node's `inventory` table: the same packages everywhere, each at its own upgrades.
fn packages(node: &Node) -> Vec<u8> {
    let mut out = Vec::with_capacity(PACKAGES * 120);
    for (row, upgrades) in node.upgrades.iter().enumerate() {
        let mut version = format!("1.{}.{}", row % 17, row % 5);
        if *upgrades > 0 {
            version.push_str(&format!("+deb12u{upgrades}"));
        }
        let package = json!({
            "name": format!("package-{row:05}"),
            "version": version,
            "architecture": if row % 9 == 0 { "all" } else { "amd64" },
            "section": format!("section-{}", row % 23),
            "installed_kb": 100 + (row * 37) % 90_000,
        });
        serde_json::to_writer(&mut out, &package).expect("writing to memory");
        out.push(b'\n');
    }
    out
}

/// The template's setup and host-facts facts as `node` reports them at `asked`: its own
/// names, addresses and ids (the same every day), its kernel and memory, and the day's time,
/// uptime, free memory and load.
fn facts(
    template: &Template,
    node: &Node,
    name: &str,
    asked: OffsetDateTime,
    rng: &mut StdRng,
) -> [Value; 2] {
    let mut own = StdRng::seed_from_u64(node.index as u64);
    let index = node.index;
    let short = name.split('.').next().unwrap_or(name);
    let address = format!(
        "10.{}.{}.{}",
        index / 65536,
        index / 256 % 256,
        index % 256 + 1
    );
    let machine_id = format!("{:032x}", own.random::<u128>());
    let version = if index % 10 == 3 { "12.10" } else { "12.11" };
    let (kernel, kernel_version) = KERNELS[node.kernel];

    let memory_mb = node.memory_mb;
    let free_mb = rng.random_range(1_000..memory_mb / 2);
    let cache_mb = rng.random_range(500..memory_mb / 3);
    let available_mb = free_mb + cache_mb;
    let uptime = asked.unix_timestamp() - node.boot;
    let load: [f64; 3] =
        std::array::from_fn(|_| (rng.random_range(0.0..4.0f64) * 100.0).round() / 100.0);

    let mut setup = template.setup.clone();
    setup["ansible_hostname"] = json!(short);
    setup["ansible_nodename"] = json!(name);
    setup["ansible_fqdn"] = json!(name);
    setup["ansible_machine_id"] = json!(machine_id);
    setup["ansible_all_ipv4_addresses"] = json!([address]);
    setup["ansible_default_ipv4"]["address"] = json!(address);
    setup["ansible_distribution_version"] = json!(version);
    setup["ansible_product_uuid"] = json!(uuid(&mut own));
    setup["ansible_product_serial"] = json!(format!("{:016x}", own.random::<u64>()));
    if let Some(facts) = setup.as_object_mut() {
        for (key, value) in facts.iter_mut() {
            if key.starts_with("ansible_ssh_host_key_")
                && let Some(text) = value.as_str()
            {
                *value = json!(random_base64(text.len(), &mut own));
            }
        }
    }
    with_new_macs(&mut setup, &mut own);
    setup["ansible_kernel"] = json!(kernel);
    setup["ansible_kernel_version"] = json!(kernel_version);
    setup["ansible_memtotal_mb"] = json!(memory_mb);
    setup["ansible_memfree_mb"] = json!(free_mb);
    setup["ansible_memory_mb"]["real"] =
        json!({"free": free_mb, "total": memory_mb, "used": memory_mb - free_mb});
    setup["ansible_memory_mb"]["nocache"] =
        json!({"free": available_mb, "used": memory_mb - available_mb});
    setup["ansible_uptime_seconds"] = json!(uptime);
    setup["ansible_loadavg"] = json!({"1m": load[0], "5m": load[1], "15m": load[2]});
    setup["ansible_date_time"] = date_time(asked);

    let mut host = template.host.clone();
    host["collected_at"] = json!(rfc3339(asked));
    host["host"]["hostname"] = json!(short);
    host["host"]["machine_id"] = json!(machine_id);
    host["host"]["boot_id"] = json!(node.boot_id);
    host["kernel"]["release"] = json!(kernel);
    host["kernel"]["version"] = json!(kernel_version);
    host["os"]["version_id"] = json!(&version[..2]);
    host["memory"]["total_bytes"] = json!(memory_mb << 20);
    host["memory"]["free_bytes"] = json!(free_mb << 20);
    host["memory"]["available_bytes"] = json!(available_mb << 20);
    host["memory"]["cached_bytes"] = json!(cache_mb << 20);
    host["memory"]["used_bytes"] = json!((memory_mb - available_mb) << 20);
    host["system"]["uptime_seconds"] = json!(uptime);
    host["system"]["boot_time"] = json!(rfc3339(
        OffsetDateTime::from_unix_timestamp(node.boot).expect("a time in range")
    ));
    host["system"]["load_average"] =
        json!({"one_minute": load[0], "five_minutes": load[1], "fifteen_minutes": load[2]});
    host["system"]["processes"] = json!(rng.random_range(80..400));
    if let Some(address_entry) = host["network"]["interfaces"][0]["addresses"][0].as_object_mut() {
        address_entry.insert("address".into(), json!(address));
    }
    with_new_macs(&mut host, &mut own);
    [setup, host]
}

/// `ansible_date_time` at `at`, as the setup module spells it (UTC).
fn date_time(at: OffsetDateTime) -> Value {
    let (year, month, day) = (at.year(), u8::from(at.month()), at.day());
    let (hour, minute, second, micro) = (at.hour(), at.minute(), at.second(), at.microsecond());
    let epoch = at.unix_timestamp().to_string();
    json!({
        "date": format!("{year:04}-{month:02}-{day:02}"),
        "day": format!("{day:02}"),
        "epoch": epoch,
        "epoch_int": epoch,
        "hour": format!("{hour:02}"),
        "iso8601": format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}Z"),
        "iso8601_basic": format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}{micro:06}"),
        "iso8601_basic_short": format!("{year:04}{month:02}{day:02}T{hour:02}{minute:02}{second:02}"),
        "iso8601_micro": format!("{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{micro:06}Z"),
        "minute": format!("{minute:02}"),
        "month": format!("{month:02}"),
        "second": format!("{second:02}"),
        "time": format!("{hour:02}:{minute:02}:{second:02}"),
        "tz": "UTC",
        "tz_dst": "UTC",
        "tz_offset": "+0000",
        "weekday": at.weekday().to_string(),
        "weekday_number": at.weekday().number_days_from_sunday().to_string(),
        "weeknumber": format!("{:02}", at.monday_based_week()),
        "year": year.to_string(),
    })
}
