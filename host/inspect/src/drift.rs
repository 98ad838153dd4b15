//! `factbuoy inspect diff`: where the nodes of one bundle disagree ([`drift`]), and what changed
//! between two bundles of one fleet ([`changes`]).
//!
//! Facts are compared leaf by leaf, every plugin's facts documents alike, with a list's items
//! matched by their declared keys, lists of scalars as sets and other lists by position
//! (`crate::keyed`). Facts that
//! change on their own (clocks, counters, free space) would drown everything else, so an
//! [`IgnoreList`] leaves them out; [`DEFAULT_IGNORES`] is built in and can be replaced.
//!
//! Every leaf path and every distinct value is stored once (`Interner`), and a node's facts as
//! pairs of numbers, so a fleet of hundreds of nodes stays a few megabytes; each facts document
//! is dropped once flattened.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;
use serde_json::Value;
use wildmatch::WildMatch;

use crate::facts::{Found, ROW_BUFFER_BYTES, RunDocuments, each_line, run_and_unchecked_facts};
use crate::keyed::{InRow, Row, TableLeaves, each_keyed_leaf};
use crate::meta::nodes_of;
use document::{field_value, fields_in_map_order};
use factbuoy_bundle::reader::{Bundle, ReadError};
use recent::RecentFields;

mod document;
mod merge;
mod recent;

/// Facts that change between any two gatherings of one host: `*` matches any run of
/// characters (dots and brackets included), `?` one.
pub const DEFAULT_IGNORES: &[&str] = &[
    // setup (Ansible's names): the clock, but not the time zone (tz, tz_offset, tz_dst), whose
    // change is one to see.
    "ansible_date_time.date",
    "ansible_date_time.day",
    "ansible_date_time.epoch*",
    "ansible_date_time.hour",
    "ansible_date_time.iso8601*",
    "ansible_date_time.minute",
    "ansible_date_time.month",
    "ansible_date_time.second",
    "ansible_date_time.time",
    "ansible_date_time.week*",
    "ansible_date_time.year",
    "ansible_uptime_seconds",
    // `ansible_loadavg['15m']`: keys that start with a digit are written in brackets.
    "ansible_loadavg*",
    "ansible_memfree_mb",
    "ansible_swapfree_mb",
    "ansible_memory_mb.*.free",
    "ansible_memory_mb.*.used",
    "ansible_memory_mb.*.cached",
    "ansible_mounts[*].block_available",
    "ansible_mounts[*].block_used",
    "ansible_mounts[*].inode_available",
    "ansible_mounts[*].inode_used",
    "ansible_mounts[*].size_available",
    // host-facts
    "collected_at",
    "system.uptime_seconds",
    "system.load_average.*",
    "system.processes*",
    "memory.available_bytes",
    "memory.free_bytes",
    "memory.used_bytes",
    "memory.buffers_bytes",
    "memory.cached_bytes",
    "memory.shared_bytes",
    "memory.swap.free_bytes",
    "memory.swap.used_bytes",
    "mounts[*].usage.available_bytes",
    "mounts[*].usage.free_bytes",
    "mounts[*].usage.used_bytes",
    "mounts[*].usage.inodes_free",
    "mounts[*].usage.inodes_used",
    "network.interfaces[*].rx_bytes",
    "network.interfaces[*].tx_bytes",
    "network.interfaces[*].rx_packets",
    "network.interfaces[*].tx_packets",
];

/// The fact paths a comparison leaves out.
#[derive(Debug, Clone)]
pub struct IgnoreList {
    patterns: Vec<(String, WildMatch)>,
}

impl IgnoreList {
    /// [`DEFAULT_IGNORES`] (unless `defaults` is false) and `extra`.
    pub fn new(defaults: bool, extra: &[String]) -> IgnoreList {
        let built_in = DEFAULT_IGNORES
            .iter()
            .filter(|_| defaults)
            .map(|p| p.to_string());
        IgnoreList {
            patterns: built_in
                .chain(extra.iter().cloned())
                .map(|p| {
                    let matcher = WildMatch::new(&p);
                    (p, matcher)
                })
                .collect(),
        }
    }

    /// The patterns, as written.
    pub fn patterns(&self) -> Vec<String> {
        self.patterns.iter().map(|(p, _)| p.clone()).collect()
    }

    /// Whether `path` is left out.
    pub fn ignores(&self, path: &str) -> bool {
        self.patterns.iter().any(|(_, m)| m.matches(path))
    }
}

/// A fact: the facts source that holds it (an index into `Interner::sources`) and its path.
type FactKey = (usize, String);

/// Each leaf path and each distinct value once, numbered; shared by the bundles compared so
/// that equal values have equal numbers. Looked up by borrowed text, so a fact seen before
/// costs no allocation.
#[derive(Default)]
struct Interner {
    /// The facts sources: plugins, or `plugin/artifact` where a plugin declares several.
    sources: Vec<String>,
    keys: Vec<FactKey>,
    /// For each source, its paths' numbers.
    key_ids: Vec<foldhash::HashMap<String, u32>>,
    ignored: Vec<bool>,
    /// A table's facts, by the number of their row's name (rows numbered across sources,
    /// looked up per source) and of the rest of their path: a table's cell costs no lookup of
    /// its whole path.
    rows: Vec<foldhash::HashMap<String, u32>>,
    row_count: u32,
    rests: foldhash::HashMap<String, u32>,
    cells: foldhash::HashMap<(u32, u32), u32>,
    /// The number of the row whose facts are being looked up.
    row: u32,
    /// The rests of paths of the row before, in its order, with their numbers.
    recent_rests: Vec<(String, u32)>,
    /// Values as compact JSON text.
    values: Vec<String>,
    value_ids: foldhash::HashMap<String, u32>,
}

impl Interner {
    fn source(&mut self, name: &str) -> usize {
        match self.sources.iter().position(|s| s == name) {
            Some(id) => id,
            None => {
                self.sources.push(name.to_owned());
                self.key_ids.push(Default::default());
                self.rows.push(Default::default());
                self.sources.len() - 1
            }
        }
    }

    fn key(&mut self, source: usize, path: &str, ignore: &IgnoreList) -> u32 {
        if let Some(id) = self.key_ids[source].get(path) {
            return *id;
        }
        let id = self.keys.len() as u32;
        self.ignored.push(ignore.ignores(path));
        self.keys.push((source, path.to_owned()));
        self.key_ids[source].insert(path.to_owned(), id);
        id
    }

    /// As [`Interner::key`], for a table's fact, placed in its row by `at`.
    fn table_key(&mut self, source: usize, path: &str, at: InRow, ignore: &IgnoreList) -> u32 {
        let (row_name, rest) = path.split_at(at.row);
        if at.fact == 0 {
            self.row = match self.rows[source].get(row_name) {
                Some(id) => *id,
                None => {
                    self.rows[source].insert(row_name.to_owned(), self.row_count);
                    self.row_count += 1;
                    self.row_count - 1
                }
            };
        }
        // Rows mostly have the same columns: the rest of the path is likely the one at the
        // same place in the row before.
        let rest_id = match self.recent_rests.get(at.fact) {
            Some((text, id)) if text == rest => *id,
            _ => {
                let id = match self.rests.get(rest) {
                    Some(id) => *id,
                    None => {
                        let id = self.rests.len() as u32;
                        self.rests.insert(rest.to_owned(), id);
                        id
                    }
                };
                if at.fact < self.recent_rests.len() {
                    self.recent_rests[at.fact] = (rest.to_owned(), id);
                } else if at.fact == self.recent_rests.len() {
                    self.recent_rests.push((rest.to_owned(), id));
                }
                id
            }
        };
        if let Some(key) = self.cells.get(&(self.row, rest_id)) {
            return *key;
        }
        let key = self.key(source, path, ignore);
        self.cells.insert((self.row, rest_id), key);
        key
    }

    /// The number of a value, given as compact JSON text.
    fn value(&mut self, text: &str) -> u32 {
        if let Some(id) = self.value_ids.get(text) {
            return *id;
        }
        let id = self.values.len() as u32;
        self.values.push(text.to_owned());
        self.value_ids.insert(text.to_owned(), id);
        id
    }

    /// Takes in `other`'s sources, paths and values, numbering the new ones in the order
    /// `other` met them, as if its bundle had been read after this one's; returns what each
    /// of `other`'s numbers became.
    fn absorb(&mut self, other: Interner) -> Renumbering {
        let sources: Vec<usize> = other.sources.iter().map(|s| self.source(s)).collect();
        let keys = other
            .keys
            .into_iter()
            .zip(other.ignored)
            .map(|((source, path), ignored)| {
                let source = sources[source];
                if let Some(id) = self.key_ids[source].get(&path) {
                    return *id;
                }
                let id = self.keys.len() as u32;
                self.ignored.push(ignored);
                self.key_ids[source].insert(path.clone(), id);
                self.keys.push((source, path));
                id
            })
            .collect();
        let values = other.values.iter().map(|v| self.value(v)).collect();
        Renumbering {
            sources,
            keys,
            values,
        }
    }

    fn json(&self, value: u32) -> Value {
        serde_json::from_str(&self.values[value as usize]).unwrap_or(Value::Null)
    }

    fn plugin(&self, key: u32) -> String {
        self.sources[self.keys[key as usize].0].clone()
    }

    fn path(&self, key: u32) -> String {
        self.keys[key as usize].1.clone()
    }
}

/// What the numbers of one [`Interner`] became in another ([`Interner::absorb`]), by old
/// number.
struct Renumbering {
    sources: Vec<usize>,
    keys: Vec<u32>,
    values: Vec<u32>,
}

/// Which bundle: its path and run, as a comparison reports them.
#[derive(Debug, Clone, Serialize)]
pub struct BundleRun {
    /// The bundle's path, as given.
    pub bundle: String,
    /// The run's id.
    pub run_id: String,
    /// When the run was created, RFC 3339 UTC.
    pub created: Option<String>,
}

/// One node's facts of one source: (key, value) pairs sorted by key, packed as variable-length
/// numbers (LEB128), each key as its distance from the one before and then its value; a
/// fact costs 3 bytes or so rather than 8.
#[derive(Debug, Default, PartialEq, Eq)]
struct Pairs(Box<[u8]>);

impl Pairs {
    /// Packs `pairs`, sorted by key.
    fn pack(pairs: &[(u32, u32)]) -> Pairs {
        let mut packed = Vec::with_capacity(pairs.len() * 3);
        let mut push = |mut n: u32| {
            while n >= 0x80 {
                packed.push(n as u8 | 0x80);
                n >>= 7;
            }
            packed.push(n as u8);
        };
        let mut last = 0;
        for &(key, value) in pairs {
            push(key - last);
            push(value);
            last = key;
        }
        Pairs(packed.into_boxed_slice())
    }

    /// The pairs, in key order.
    fn unpack(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let mut bytes = self.0.iter();
        let mut next = move || {
            let mut n = 0;
            for shift in (0..).step_by(7) {
                let byte = *bytes.next()?;
                n |= u32::from(byte & 0x7f) << shift;
                if byte < 0x80 {
                    break;
                }
            }
            Some(n)
        };
        let mut key = 0;
        std::iter::from_fn(move || {
            key += next()?;
            Some((key, next()?))
        })
    }
}

/// One node's facts from each source it has facts from, by source.
type NodeFacts = BTreeMap<usize, Pairs>;
/// A split of the nodes into sets (node numbers), and the facts that split them so, each with
/// the value of every set.
type Partitions = HashMap<Vec<Vec<u32>>, Vec<(u32, Vec<u32>)>>;

/// One bundle's facts, by node.
struct Fleet {
    run: BundleRun,
    /// Every node of the run, in the status document's order.
    nodes: Vec<String>,
    /// For each node, for each source: its facts, as (key, value) pairs sorted by key; absent
    /// when the bundle has no facts of that source for the node.
    facts: HashMap<String, NodeFacts>,
    /// The sources any node has facts from.
    sources: BTreeSet<usize>,
}

impl Fleet {
    /// Reads `bundle`'s run, its nodes and every node's facts, in one pass.
    fn load(
        bundle: &Bundle,
        interner: &mut Interner,
        ignore: &IgnoreList,
    ) -> Result<Fleet, ReadError> {
        let mut facts: HashMap<String, NodeFacts> = HashMap::new();
        let mut sources = BTreeSet::new();
        let mut recent = RecentFields::default();
        // The fields parsed alone are copied here first (`field_value`).
        let mut wrapped = Vec::new();
        let RunDocuments { run, status } = run_and_unchecked_facts(bundle, |found, _| {
            let mut pairs = Vec::new();
            let (node, source) = match found {
                Found::Facts {
                    node,
                    source,
                    list_keys,
                    facts: (entry, facts),
                } => {
                    let source = interner.source(source);
                    let leaf = |interner: &mut Interner,
                                pairs: &mut Vec<(u32, u32)>,
                                path: &str,
                                value: &str| {
                        let key = interner.key(source, path, ignore);
                        if !interner.ignored[key as usize] {
                            pairs.push((key, interner.value(value)));
                        }
                    };
                    // The fields read lately add the facts they added then, their bytes
                    // compared but not scanned, checked nor parsed; the others are parsed,
                    // all before any is walked, so that a document is taken only once all of
                    // it is known good.
                    let known = |key: &str, rest: &[u8]| {
                        let (length, known) = recent.starting(source, key, rest)?;
                        pairs.extend_from_slice(known);
                        Some(length)
                    };
                    let fresh = fields_in_map_order(&facts, known).and_then(|fields| {
                        let mut fresh = Vec::new();
                        for (key, bytes, known) in fields {
                            if !known {
                                fresh.push((key, bytes, field_value(bytes, &mut wrapped)?));
                            }
                        }
                        Some(fresh)
                    });
                    match fresh {
                        // Field by field, in the order a parsed document's come, so that
                        // paths and values are numbered as they would be.
                        Some(fresh) => {
                            for (key, bytes, value) in fresh {
                                // The field alone, under its key: its facts get their whole
                                // paths and the lists below it their keys.
                                let field = Value::Object(serde_json::Map::from_iter([(
                                    key.to_owned(),
                                    value,
                                )]));
                                let start = pairs.len();
                                each_keyed_leaf(&field, list_keys, |path, value| {
                                    leaf(interner, &mut pairs, path, value)
                                });
                                recent.put(source, key, bytes, &pairs[start..]);
                            }
                        }
                        // Read whole: refused with the error parsing gives, naming the entry.
                        None => {
                            pairs.clear();
                            let whole = serde_json::from_slice::<Value>(&facts)
                                .map_err(|cause| ReadError::InvalidJson { entry, cause })?;
                            each_keyed_leaf(&whole, list_keys, |path, value| {
                                leaf(interner, &mut pairs, path, value)
                            });
                        }
                    }
                    (node, source)
                }
                // A table without row keys has rows nothing identifies (a journal written as
                // JSON Lines before artifacts had kinds reads as one): not compared.
                Found::Table { row_keys: [], .. } => return Ok(()),
                // A table is compared as a facts document holding one list, named after the
                // artifact, whose items are the rows, matched by their keys.
                Found::Table {
                    node,
                    plugin,
                    artifact,
                    row_keys,
                    rows,
                } => {
                    let source = interner.source(plugin);
                    let mut leaf = |path: &str, at: InRow, value: &str| {
                        let key = interner.table_key(source, path, at, ignore);
                        if !interner.ignored[key as usize] {
                            pairs.push((key, interner.value(value)));
                        }
                    };
                    let mut table = TableLeaves::new(artifact, row_keys);
                    let entry = rows.path().to_owned();
                    let reader = std::io::BufReader::with_capacity(ROW_BUFFER_BYTES, rows);
                    each_line(&entry, reader, |number, line| {
                        table.row(Row::read(&entry, number, line)?, &mut leaf);
                        Ok::<(), ReadError>(())
                    })?;
                    table.finish(&mut leaf);
                    (node, source)
                }
            };
            sources.insert(source);
            let kept = facts
                .entry(node.to_owned())
                .or_default()
                .entry(source)
                .or_default();
            // A plugin's facts document and its tables are one source.
            pairs.extend(kept.unpack());
            // The stable sort merges the sorted runs the pairs mostly come in.
            pairs.sort();
            *kept = Pairs::pack(&pairs);
            Ok(())
        })?;
        let mut nodes = nodes_of(&status);
        // A result whose node the status document does not name still counts.
        let mut unlisted: Vec<&String> = facts.keys().filter(|n| !nodes.contains(n)).collect();
        unlisted.sort();
        nodes.extend(unlisted.into_iter().cloned());
        Ok(Fleet {
            run: BundleRun {
                bundle: bundle.path().display().to_string(),
                run_id: status.run_id.clone(),
                created: run
                    .as_ref()
                    .and_then(|r| r["created"].as_str())
                    .map(str::to_owned),
            },
            nodes,
            facts,
            sources,
        })
    }

    /// Numbers the facts as `renumbering` says, after their interner was absorbed.
    fn renumber(&mut self, renumbering: &Renumbering) {
        for sources in self.facts.values_mut() {
            *sources = std::mem::take(sources)
                .into_iter()
                .map(|(source, pairs)| {
                    let mut pairs: Vec<(u32, u32)> = pairs
                        .unpack()
                        .map(|(key, value)| {
                            (
                                renumbering.keys[key as usize],
                                renumbering.values[value as usize],
                            )
                        })
                        .collect();
                    // Mostly in order still: the stable sort merges the runs.
                    pairs.sort();
                    (renumbering.sources[source], Pairs::pack(&pairs))
                })
                .collect();
        }
        self.sources = self
            .sources
            .iter()
            .map(|source| renumbering.sources[*source])
            .collect();
    }

    /// `node`'s facts from `source`, sorted by key.
    fn facts_of(&self, node: &str, source: usize) -> Option<&Pairs> {
        self.facts.get(node)?.get(&source)
    }

    /// The nodes without facts of some source that other nodes have, and which.
    fn without_facts(&self, interner: &Interner) -> Vec<NodeWithout> {
        self.nodes
            .iter()
            .filter_map(|node| {
                let plugins: Vec<String> = self
                    .sources
                    .iter()
                    .filter(|source| self.facts_of(node, **source).is_none())
                    .map(|source| interner.sources[*source].clone())
                    .collect();
                (!plugins.is_empty()).then(|| NodeWithout {
                    node: node.clone(),
                    plugins,
                })
            })
            .collect()
    }
}

/// A node lacking some plugins' facts (its result failed, or the plugin did not run): it
/// takes no part in comparing those plugins' facts.
#[derive(Debug, Clone, Serialize)]
pub struct NodeWithout {
    /// The node.
    pub node: String,
    /// The plugins it has no facts from.
    pub plugins: Vec<String>,
}

/// What was left out of a comparison.
#[derive(Debug, Clone, Serialize)]
pub struct Ignored {
    /// The patterns of the [`IgnoreList`].
    pub patterns: Vec<String>,
    /// How many distinct fact paths they matched.
    pub facts: usize,
}

impl Ignored {
    fn of(interner: &Interner, ignore: &IgnoreList) -> Ignored {
        Ignored {
            patterns: ignore.patterns(),
            facts: interner.ignored.iter().filter(|i| **i).count(),
        }
    }
}

/// Where the nodes of one bundle disagree.
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    /// The bundle.
    pub bundle: BundleRun,
    /// Its nodes.
    pub nodes: Vec<String>,
    /// Nodes left out of some plugins' comparison.
    pub without_facts: Vec<NodeWithout>,
    /// What was left out.
    pub ignored: Ignored,
    /// In a fleet of [`ALONE_FROM`] nodes or more, the facts only one node has (an address of
    /// its own in a set, a mount only it has), by node and plugin: each is not a split of the
    /// fleet into that node and all the others, which would make a group per node.
    pub alone: Vec<AloneFacts>,
    /// The facts on which nodes disagree, grouped by how they split the nodes: facts that
    /// split the fleet the same way (a kernel, its version and its build date) are one group.
    /// Groups of fewer node sets come first, so a few odd nodes are at the top and the facts
    /// every node has its own value of (names, addresses) at the bottom.
    pub groups: Vec<DriftGroup>,
}

/// From how many nodes with a plugin's facts a fact only one of them has is told as that
/// node's own ([`Drift::alone`]) rather than as a split of the fleet.
pub const ALONE_FROM: usize = 10;

/// The paths [`AloneFacts::first`] lists.
const ALONE_SHOWN: usize = 5;

/// The facts of one plugin that one node alone has.
#[derive(Debug, Clone, Serialize)]
pub struct AloneFacts {
    /// The node.
    pub node: String,
    /// The plugin, as `inspect facts` names it.
    pub plugin: String,
    /// How many such facts it has.
    pub facts: usize,
    /// The first of their paths, in path order.
    pub first: Vec<String>,
}

/// Facts that split the nodes into the same sets.
#[derive(Debug, Clone, Serialize)]
pub struct DriftGroup {
    /// The sets of nodes that agree, largest first.
    pub node_sets: Vec<Vec<String>>,
    /// The facts, each with one value per node set.
    pub facts: Vec<DriftFact>,
}

/// One fact on which the nodes disagree.
#[derive(Debug, Clone, Serialize)]
pub struct DriftFact {
    /// The plugin whose facts hold it, as `inspect facts` names it.
    pub plugin: String,
    /// The fact's path, as `query` takes it.
    pub path: String,
    /// The value of each node set, in the order of `node_sets`; `null` where `absent` says so.
    pub values: Vec<Value>,
    /// The indices of the node sets that lack the fact.
    pub absent: Vec<usize>,
}

/// Where the nodes of `bundle` disagree on their facts, but for what `ignore` leaves out.
pub fn drift(bundle: &Bundle, ignore: &IgnoreList) -> Result<Drift, ReadError> {
    let mut interner = Interner::default();
    let fleet = Fleet::load(bundle, &mut interner, ignore)?;
    const ABSENT: u32 = u32::MAX;
    // Node number -> name, in the run's order; a partition is written in node numbers.
    let nodes = &fleet.nodes;
    let mut groups: Partitions = HashMap::new();
    // Node number -> the facts only it has, by source (see `Drift::alone`).
    let mut alone: BTreeMap<(u32, usize), Vec<u32>> = BTreeMap::new();
    for &source in &fleet.sources {
        // The nodes with this plugin's facts, each with its pairs sorted by key (unpacked one
        // plugin at a time).
        let members: Vec<(u32, Vec<(u32, u32)>)> = nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| Some((i as u32, fleet.facts_of(n, source)?.unpack().collect())))
            .collect();
        if members.len() < 2 {
            continue;
        }
        let pairs: Vec<&[(u32, u32)]> = members.iter().map(|(_, pairs)| &pairs[..]).collect();
        merge::each_key(&pairs, |key, present| {
            if present.len() == members.len() && present.iter().all(|(_, v)| *v == present[0].1) {
                return;
            }
            if present.len() == 1 && members.len() >= ALONE_FROM {
                alone
                    .entry((members[present[0].0].0, source))
                    .or_default()
                    .push(key);
                return;
            }
            let mut values = vec![ABSENT; members.len()];
            for (m, value) in present {
                values[*m] = *value;
            }
            // Node sets by value, largest first, then by their first node.
            let mut by_value: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
            for ((node, _), value) in members.iter().zip(&values) {
                by_value.entry(*value).or_default().push(*node);
            }
            let mut sets: Vec<(u32, Vec<u32>)> = by_value.into_iter().collect();
            sets.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.1[0].cmp(&b.1[0])));
            let (set_values, partition): (Vec<u32>, Vec<Vec<u32>>) = sets.into_iter().unzip();
            groups.entry(partition).or_default().push((key, set_values));
        });
    }
    let mut groups: Vec<DriftGroup> = groups
        .into_iter()
        .map(|(partition, facts)| DriftGroup {
            node_sets: partition
                .iter()
                .map(|set| set.iter().map(|n| nodes[*n as usize].clone()).collect())
                .collect(),
            facts: facts
                .into_iter()
                .map(|(key, values)| DriftFact {
                    plugin: interner.plugin(key),
                    path: interner.path(key),
                    absent: (0..values.len()).filter(|i| values[*i] == ABSENT).collect(),
                    values: values
                        .iter()
                        .map(|v| match *v {
                            ABSENT => Value::Null,
                            v => interner.json(v),
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    for group in &mut groups {
        group.facts.sort_by(|a, b| {
            a.plugin
                .cmp(&b.plugin)
                .then_with(|| path_order(&a.path, &b.path))
        });
    }
    groups.sort_by(|a, b| {
        a.node_sets
            .len()
            .cmp(&b.node_sets.len())
            .then(b.facts.len().cmp(&a.facts.len()))
            .then_with(|| a.node_sets.cmp(&b.node_sets))
    });
    let alone = alone
        .into_iter()
        .map(|((node, _), keys)| {
            let mut paths: Vec<String> = keys.iter().map(|k| interner.path(*k)).collect();
            paths.sort_by(|a, b| path_order(a, b));
            AloneFacts {
                node: nodes[node as usize].clone(),
                plugin: interner.plugin(keys[0]),
                facts: paths.len(),
                first: paths.into_iter().take(ALONE_SHOWN).collect(),
            }
        })
        .collect();
    Ok(Drift {
        bundle: fleet.run.clone(),
        without_facts: fleet.without_facts(&interner),
        alone,
        nodes: fleet.nodes,
        ignored: Ignored::of(&interner, ignore),
        groups,
    })
}

/// What changed between two bundles of one fleet.
#[derive(Debug, Clone, Serialize)]
pub struct Changes {
    /// The earlier bundle.
    pub before: BundleRun,
    /// The later bundle.
    pub after: BundleRun,
    /// Whether the bundles were given later first, and are compared in the order their runs
    /// were created instead.
    pub reordered: bool,
    /// Nodes only in `after`.
    pub nodes_added: Vec<String>,
    /// Nodes only in `before`.
    pub nodes_removed: Vec<String>,
    /// How many nodes are in both, and were compared.
    pub nodes_compared: usize,
    /// Nodes in both whose facts of some plugin one bundle lacks: those facts are not
    /// compared (a failed result is not a change of every fact).
    pub not_compared: Vec<NotCompared>,
    /// What was left out.
    pub ignored: Ignored,
    /// What changed below each top-level field, counted as people count it, before the
    /// changes themselves.
    pub subtrees: Vec<SubtreeChanges>,
    /// The facts that changed, each change once with the nodes it happened on, by plugin and
    /// path.
    pub changes: Vec<Change>,
}

/// What changed below one top-level field of one plugin's facts: items of keyed lists and
/// elements of sets added, removed or changed, other facts one by one (`ansible_mounts: 1
/// removed`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct SubtreeChanges {
    /// The plugin.
    pub plugin: String,
    /// The top-level field, as the paths of its facts start.
    pub subtree: String,
    /// Items or facts that are new.
    pub added: usize,
    /// Items or facts that are gone.
    pub removed: usize,
    /// Items or facts that are there before and after, with another value.
    pub changed: usize,
}

/// One node's facts of one plugin that a bundle lacks.
#[derive(Debug, Clone, Serialize)]
pub struct NotCompared {
    /// The node.
    pub node: String,
    /// The plugin, as `inspect facts` names it.
    pub plugin: String,
    /// `before` or `after`: the bundle without them (the first, when both lack them).
    pub missing_in: String,
}

/// How a fact changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// It has another value.
    Changed,
    /// It is new.
    Added,
    /// It is gone.
    Removed,
}

/// One change of one fact, on the nodes where it happened alike.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    /// The plugin whose facts hold it, as `inspect facts` names it.
    pub plugin: String,
    /// The fact's path.
    pub path: String,
    /// Changed, added or removed.
    pub kind: ChangeKind,
    /// The value before (`null` when added).
    pub before: Value,
    /// The value after (`null` when removed).
    pub after: Value,
    /// The nodes, in `after`'s order.
    pub nodes: Vec<String>,
}

/// What changed from `before` to `after`: nodes added and removed, and for the nodes in both,
/// each fact's change with the nodes it happened on, but for what `ignore` leaves out.
pub fn changes(before: &Bundle, after: &Bundle, ignore: &IgnoreList) -> Result<Changes, ReadError> {
    // The two bundles are read at once, each on its own thread with its own interner; the
    // second's numbers are then made the first's.
    let mut interner = Interner::default();
    let (old, new) = std::thread::scope(|scope| {
        let later = scope.spawn(|| {
            let mut own = Interner::default();
            Fleet::load(after, &mut own, ignore).map(|fleet| (fleet, own))
        });
        let old = Fleet::load(before, &mut interner, ignore);
        let new = later
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (old, new)
    });
    let mut old = old?;
    let (mut new, theirs) = new?;
    new.renumber(&interner.absorb(theirs));
    // Compared in the order the runs were created, whatever the order given: a shell glob of
    // bundles made in the same second sorts them by run id.
    let created = |run: &BundleRun| {
        run.created.as_deref().and_then(|t| {
            time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()
        })
    };
    let reordered = matches!(
        (created(&old.run), created(&new.run)),
        (Some(first), Some(second)) if second < first
    );
    if reordered {
        std::mem::swap(&mut old, &mut new);
    }
    let nodes_added: Vec<String> = new
        .nodes
        .iter()
        .filter(|n| !old.nodes.contains(n))
        .cloned()
        .collect();
    let nodes_removed: Vec<String> = old
        .nodes
        .iter()
        .filter(|n| !new.nodes.contains(n))
        .cloned()
        .collect();
    let both: Vec<&String> = new.nodes.iter().filter(|n| old.nodes.contains(n)).collect();
    let mut not_compared = Vec::new();
    // (key, before, after) -> nodes; `None` is absent.
    let mut found: BTreeMap<(u32, Option<u32>, Option<u32>), Vec<String>> = BTreeMap::new();
    for node in &both {
        for &source in old.sources.union(&new.sources) {
            let plugin = &interner.sources[source];
            let (Some(a), Some(b)) = (old.facts_of(node, source), new.facts_of(node, source))
            else {
                let missing_in = if old.facts_of(node, source).is_none() {
                    "before"
                } else {
                    "after"
                };
                not_compared.push(NotCompared {
                    node: node.to_string(),
                    plugin: plugin.to_string(),
                    missing_in: missing_in.into(),
                });
                continue;
            };
            // Both are sorted by key: walk them side by side.
            let (mut a, mut b) = (a.unpack().peekable(), b.unpack().peekable());
            loop {
                let change = match (a.peek().copied(), b.peek().copied()) {
                    (None, None) => break,
                    (Some(x), Some(y)) if x.0 == y.0 => {
                        a.next();
                        b.next();
                        (x.1 != y.1).then_some((x.0, Some(x.1), Some(y.1)))
                    }
                    (Some(x), y) if y.is_none_or(|y| x.0 < y.0) => {
                        a.next();
                        Some((x.0, Some(x.1), None))
                    }
                    (_, Some(y)) => {
                        b.next();
                        Some((y.0, None, Some(y.1)))
                    }
                    (_, None) => unreachable!("the loop runs while either side has pairs"),
                };
                if let Some(change) = change {
                    found.entry(change).or_default().push(node.to_string());
                }
            }
        }
    }
    let mut changes: Vec<Change> = found
        .into_iter()
        .map(|((key, was, is), nodes)| Change {
            plugin: interner.plugin(key),
            path: interner.path(key),
            kind: match (was, is) {
                (Some(_), Some(_)) => ChangeKind::Changed,
                (None, _) => ChangeKind::Added,
                (_, None) => ChangeKind::Removed,
            },
            before: was.map_or(Value::Null, |v| interner.json(v)),
            after: is.map_or(Value::Null, |v| interner.json(v)),
            nodes,
        })
        .collect();
    changes.sort_by(|a, b| {
        a.plugin
            .cmp(&b.plugin)
            .then_with(|| path_order(&a.path, &b.path))
            .then(b.nodes.len().cmp(&a.nodes.len()))
    });
    Ok(Changes {
        before: old.run,
        after: new.run,
        reordered,
        nodes_added,
        nodes_removed,
        nodes_compared: both.len(),
        not_compared,
        ignored: Ignored::of(&interner, ignore),
        subtrees: subtrees(&changes),
        changes,
    })
}

/// The changes counted per top-level field. The unit counted is a list item (the path up to
/// its first `]`: `ansible_mounts[mount="/boot"]`), an element of a set, or else the fact; an
/// item is added or removed when every change inside it is, and changed otherwise.
fn subtrees(changes: &[Change]) -> Vec<SubtreeChanges> {
    // (plugin, subtree) -> unit -> kinds seen inside it.
    let mut units: BTreeMap<(&str, &str), BTreeMap<&str, BTreeSet<ChangeKind>>> = BTreeMap::new();
    let mut sets: BTreeMap<(&str, &str), (usize, usize)> = BTreeMap::new();
    for change in changes {
        let key = (change.plugin.as_str(), top_field(&change.path));
        if let (Value::Array(before), Value::Array(after)) = (&change.before, &change.after) {
            // A set: its elements added and removed.
            let (added, removed) = sets.entry(key).or_default();
            *added += after.iter().filter(|v| !before.contains(v)).count();
            *removed += before.iter().filter(|v| !after.contains(v)).count();
            continue;
        }
        let unit = match change.path.find(']') {
            Some(end) if !change.path[..end].ends_with('\'') => &change.path[..=end],
            _ => change.path.as_str(),
        };
        units
            .entry(key)
            .or_default()
            .entry(unit)
            .or_default()
            .insert(change.kind);
    }
    let mut summaries: BTreeMap<(&str, &str), SubtreeChanges> = BTreeMap::new();
    for (key, units) in units {
        let summary = summaries.entry(key).or_default();
        for kinds in units.values() {
            match kinds.iter().collect::<Vec<_>>().as_slice() {
                [ChangeKind::Added] => summary.added += 1,
                [ChangeKind::Removed] => summary.removed += 1,
                _ => summary.changed += 1,
            }
        }
    }
    for (key, (added, removed)) in sets {
        let summary = summaries.entry(key).or_default();
        summary.added += added;
        summary.removed += removed;
    }
    summaries
        .into_iter()
        .map(|((plugin, subtree), summary)| SubtreeChanges {
            plugin: plugin.to_owned(),
            subtree: subtree.to_owned(),
            ..summary
        })
        .collect()
}

/// The top-level field a fact's path starts with: `ansible_mounts` of
/// `ansible_mounts[mount="/"].size`, `['/dev/x']` of `['/dev/x'].size`.
fn top_field(path: &str) -> &str {
    if path.starts_with("['") {
        return match path.find("']") {
            Some(end) => &path[..end + 2],
            None => path,
        };
    }
    let end = path.find(['.', '[']).unwrap_or(path.len());
    &path[..end]
}

/// The order of fact paths for people: as text, but numbers as numbers (`flags[3]` before
/// `flags[35]`, `eth2` before `eth10`), so that a list's items stay in their order.
fn path_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        let digits = |s: &[u8]| s.iter().take_while(|c| c.is_ascii_digit()).count();
        let (da, db) = (digits(a), digits(b));
        if da > 0 && db > 0 {
            // Numbers: the shorter (without leading zeros) is the smaller, then digit by digit.
            let trim = |s: &[u8]| {
                let zeros = s.iter().take_while(|c| **c == b'0').count();
                s[zeros.min(s.len() - 1)..].to_vec()
            };
            let (na, nb) = (trim(&a[..da]), trim(&b[..db]));
            let order = na.len().cmp(&nb.len()).then_with(|| na.cmp(&nb));
            if order.is_ne() {
                return order;
            }
            (a, b) = (&a[da..], &b[db..]);
            continue;
        }
        match (a.first(), b.first()) {
            (None, None) => return std::cmp::Ordering::Equal,
            (None, Some(_)) => return std::cmp::Ordering::Less,
            (Some(_), None) => return std::cmp::Ordering::Greater,
            (Some(x), Some(y)) if x != y => return x.cmp(y),
            _ => (a, b) = (&a[1..], &b[1..]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_indices_sort_as_numbers() {
        let mut paths = vec![
            "flags[40]",
            "flags[3]",
            "flags[35]",
            "flags[10].x",
            "flags[10]",
            "a",
            "flags[03]b",
        ];
        paths.sort_by(|a, b| path_order(a, b));
        assert_eq!(
            paths,
            [
                "a",
                "flags[3]",
                "flags[03]b",
                "flags[10]",
                "flags[10].x",
                "flags[35]",
                "flags[40]"
            ]
        );
    }

    #[test]
    fn packed_pairs_unpack_as_they_were() {
        let pairs = [
            (0, 0),
            (1, 127),
            (2, 128),
            (130, 16_384),
            (131, u32::MAX),
            (u32::MAX, 5),
        ];
        let packed = Pairs::pack(&pairs);
        assert_eq!(packed.unpack().collect::<Vec<_>>(), pairs);
        assert_eq!(Pairs::pack(&[]).unpack().count(), 0);
        // Small keys a step apart and small values take two bytes a pair.
        assert_eq!(Pairs::pack(&[(5, 1), (6, 100), (8, 3)]).0.len(), 6);
    }

    #[test]
    fn patterns_match_whole_paths_across_dots_and_brackets() {
        let ignore = IgnoreList::new(true, &["custom.*".into()]);
        assert!(ignore.ignores("ansible_mounts[3].size_available"));
        assert!(ignore.ignores("ansible_date_time.epoch"));
        assert!(ignore.ignores("custom.anything[0].deep"));
        assert!(!ignore.ignores("ansible_mounts[3].size_total"));
        assert!(!ignore.ignores("ansible_kernel"));
        let none = IgnoreList::new(false, &[]);
        assert!(!none.ignores("ansible_date_time.epoch"));
    }

    #[test]
    fn the_built_in_list_leaves_out_the_clock_but_not_the_time_zone() {
        let ignore = IgnoreList::new(true, &[]);
        // Every key of setup's ansible_date_time (plugins/setup/src/collectors/date_time.rs).
        for clock in [
            "year",
            "month",
            "weekday",
            "weekday_number",
            "weeknumber",
            "day",
            "hour",
            "minute",
            "second",
            "epoch",
            "epoch_int",
            "date",
            "time",
            "iso8601_micro",
            "iso8601",
            "iso8601_basic",
            "iso8601_basic_short",
        ] {
            assert!(
                ignore.ignores(&format!("ansible_date_time.{clock}")),
                "{clock}"
            );
        }
        for zone in ["tz", "tz_offset", "tz_dst"] {
            assert!(
                !ignore.ignores(&format!("ansible_date_time.{zone}")),
                "{zone}"
            );
        }
    }

    #[test]
    fn changes_are_summarised_per_top_level_field_as_items_sets_and_facts() {
        let change = |path: &str, kind, before: Value, after: Value| Change {
            plugin: "setup".into(),
            path: path.into(),
            kind,
            before,
            after,
            nodes: vec!["n1".into()],
        };
        use ChangeKind::*;
        let changes = [
            // One mount gone (all its facts removed), another changed in one fact.
            change(
                r#"ansible_mounts[mount="/mnt"].mount"#,
                Removed,
                "/mnt".into(),
                Value::Null,
            ),
            change(
                r#"ansible_mounts[mount="/mnt"].size"#,
                Removed,
                1.into(),
                Value::Null,
            ),
            change(
                r#"ansible_mounts[mount="/"].size"#,
                Changed,
                1.into(),
                2.into(),
            ),
            // A set that gained two interfaces and lost one.
            change(
                "ansible_interfaces",
                Changed,
                serde_json::json!(["eth0", "lo"]),
                serde_json::json!(["eth1", "eth2", "lo"]),
            ),
            change("ansible_kernel", Changed, "6.1".into(), "6.2".into()),
            change("ansible_eth1.mtu", Added, Value::Null, 1500.into()),
            change("ansible_eth1.device", Added, Value::Null, "eth1".into()),
        ];
        let summary: Vec<(String, usize, usize, usize)> = subtrees(&changes)
            .into_iter()
            .map(|s| (s.subtree, s.added, s.removed, s.changed))
            .collect();
        assert_eq!(
            summary,
            [
                ("ansible_eth1".into(), 2, 0, 0),
                ("ansible_interfaces".into(), 2, 1, 0),
                ("ansible_kernel".into(), 0, 0, 1),
                ("ansible_mounts".into(), 0, 1, 1),
            ]
        );
        assert_eq!(top_field("['/dev/x'].size"), "['/dev/x']");
    }
}
