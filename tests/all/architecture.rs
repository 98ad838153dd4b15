//! The workspace's shape, checked: no crate has an import cycle between its modules, no command
//! module of the binary imports another, and no crate depends on one the architecture rules
//! out for it, read from `cargo metadata` (docs/architecture.md).
//!
//! Each crate's module tree is read from its sources with `syn` (no build needed). Every path in
//! a module's code (`crate::a::b`, `super::x`, a name brought in by `use`, paths inside macro
//! calls too) is resolved to the module that defines it, following re-exports; `use`
//! declarations themselves count only through the code that uses their names, so a parent's
//! `pub use child::Item` is not a dependency of the parent. A dependency from module A on module
//! B is then an edge between the two siblings that contain them, or between a module's own body
//! (the items written in its file) and one of its children; a cycle among the siblings of any
//! module is a failure. `#[cfg(test)]` items are left out: tests may reach anywhere.
//!
//! `cargo test -p factbuoy --test all architecture::` runs it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module's absolute path inside its crate (`[]` is the crate root).
type ModPath = Vec<String>;

/// One module: where its file is, the names it imports, the paths its code names.
#[derive(Default)]
struct Module {
    /// Local name → absolute path it was imported from (`use` items, `pub` or not).
    imports: BTreeMap<String, ModPath>,
    /// Child module names.
    children: BTreeSet<String>,
    /// Paths named by the module's own code, as written (leading `crate`/`super`/`self` kept).
    named: Vec<Vec<String>>,
}

/// A crate's modules by absolute path.
struct Crate {
    name: String,
    modules: BTreeMap<ModPath, Module>,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

/// The file of module `name` declared in `parent_file`, as rustc looks for it.
fn module_file(
    parent_file: &Path,
    is_mod_root: bool,
    name: &str,
    attrs: &[syn::Attribute],
) -> PathBuf {
    let dir = if is_mod_root {
        parent_file.parent().unwrap().to_owned()
    } else {
        parent_file.with_extension("")
    };
    for a in attrs {
        if a.path().is_ident("path")
            && let syn::Meta::NameValue(nv) = &a.meta
            && let syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) = &nv.value
        {
            return dir.join(s.value());
        }
    }
    let flat = dir.join(format!("{name}.rs"));
    if flat.exists() {
        flat
    } else {
        dir.join(name).join("mod.rs")
    }
}

fn read_file_module(
    file: &Path,
    path: ModPath,
    is_mod_root: bool,
    modules: &mut BTreeMap<ModPath, Module>,
) {
    let text =
        std::fs::read_to_string(file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
    let parsed =
        syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()));
    read_items(&parsed.items, file, is_mod_root, path, modules);
}

fn read_items(
    items: &[syn::Item],
    file: &Path,
    is_mod_root: bool,
    path: ModPath,
    modules: &mut BTreeMap<ModPath, Module>,
) {
    let mut module = Module::default();
    let mut collector = Collector { named: Vec::new() };
    for item in items {
        match item {
            syn::Item::Mod(m) if is_cfg_test(&m.attrs) => {}
            syn::Item::Mod(m) => {
                let name = m.ident.to_string();
                module.children.insert(name.clone());
                let mut child = path.clone();
                child.push(name.clone());
                match &m.content {
                    Some((_, inner)) => {
                        // An inline module's files would sit in a folder named after it.
                        let inner_file = if is_mod_root {
                            file.parent().unwrap().join(&name).join("mod.rs")
                        } else {
                            file.with_extension("").join(&name).join("mod.rs")
                        };
                        read_items(inner, &inner_file, true, child, modules);
                    }
                    None => {
                        let child_file = module_file(file, is_mod_root, &name, &m.attrs);
                        let root = child_file.file_name().is_some_and(|f| f == "mod.rs");
                        read_file_module(&child_file, child, root, modules);
                    }
                }
            }
            syn::Item::Use(u) if !is_cfg_test(&u.attrs) => {
                flatten_use(&u.tree, Vec::new(), &mut module.imports);
            }
            syn::Item::Use(_) => {}
            other => {
                if !item_is_cfg_test(other) {
                    collector.visit_item(other);
                }
            }
        }
    }
    module.named = collector.named;
    modules.insert(path, module);
}

fn item_is_cfg_test(item: &syn::Item) -> bool {
    let attrs: &[syn::Attribute] = match item {
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        _ => &[],
    };
    is_cfg_test(attrs)
}

/// `use a::{b, c::d as e}` → `b → a::b`, `e → a::c::d`; globs are kept as `*`.
fn flatten_use(tree: &syn::UseTree, prefix: Vec<String>, out: &mut BTreeMap<String, ModPath>) {
    match tree {
        syn::UseTree::Path(p) => {
            let mut next = prefix;
            next.push(p.ident.to_string());
            flatten_use(&p.tree, next, out);
        }
        syn::UseTree::Name(n) => {
            let name = n.ident.to_string();
            let mut full = prefix;
            if name == "self" {
                let last = full.last().cloned().unwrap_or_default();
                out.insert(last, full);
            } else {
                full.push(name.clone());
                out.insert(name, full);
            }
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix;
            full.push(r.ident.to_string());
            out.insert(r.rename.to_string(), full);
        }
        syn::UseTree::Glob(_) => {
            let key = format!("*{}", out.len());
            let mut full = prefix;
            full.push("*".into());
            out.insert(key, full);
        }
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix.clone(), out);
            }
        }
    }
}

/// Every path the code names, macro bodies included.
struct Collector {
    named: Vec<Vec<String>>,
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.named
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_item_mod(&mut self, _: &'ast syn::ItemMod) {}

    fn visit_item_use(&mut self, _: &'ast syn::ItemUse) {}

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {}

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        scan_tokens(mac.tokens.clone(), &mut self.named);
    }
}

/// Paths in a macro's tokens: identifiers joined by `::`.
fn scan_tokens(tokens: proc_macro2::TokenStream, named: &mut Vec<Vec<String>>) {
    use proc_macro2::TokenTree;
    fn flush(current: &mut Vec<String>, named: &mut Vec<Vec<String>>) {
        if !current.is_empty() {
            named.push(std::mem::take(current));
        }
    }
    let mut current: Vec<String> = Vec::new();
    let mut colons = 0;
    for token in tokens {
        match token {
            TokenTree::Ident(i) => {
                if colons != 2 {
                    flush(&mut current, named);
                }
                current.push(i.to_string());
                colons = 0;
            }
            TokenTree::Punct(p) if p.as_char() == ':' => colons += 1,
            TokenTree::Group(g) => {
                flush(&mut current, named);
                scan_tokens(g.stream(), named);
                colons = 0;
            }
            _ => {
                flush(&mut current, named);
                colons = 0;
            }
        }
    }
    flush(&mut current, named);
}

impl Crate {
    fn read(name: &str, root_file: &Path) -> Crate {
        let mut modules = BTreeMap::new();
        read_file_module(root_file, Vec::new(), true, &mut modules);
        Crate {
            name: name.to_owned(),
            modules,
        }
    }

    /// Turns `path` as written in module `from` into an absolute path inside the crate, or
    /// `None` when it names something outside it (another crate, std, a local variable).
    fn absolute(&self, from: &ModPath, path: &[String], depth: usize) -> Option<ModPath> {
        if depth > 16 || path.is_empty() {
            return None;
        }
        let (mut base, rest): (ModPath, &[String]) = match path[0].as_str() {
            "crate" => (Vec::new(), &path[1..]),
            "self" => (from.clone(), &path[1..]),
            "super" => {
                let mut base = from.clone();
                let mut rest = path;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            first => {
                let module = self.modules.get(from)?;
                if module.children.contains(first) {
                    (from.clone(), path)
                } else if let Some(imported) = module.imports.get(first) {
                    let mut full = imported.clone();
                    full.extend_from_slice(&path[1..]);
                    return self.absolute(from, &full, depth + 1);
                } else {
                    return None;
                }
            }
        };
        // Walk down through modules; a name that is an import of the module reached is
        // followed (a re-export), anything else is an item of that module.
        let mut rest = rest.to_vec();
        while let Some(first) = rest.first().cloned() {
            let module = self.modules.get(&base)?;
            if module.children.contains(&first) {
                base.push(first);
                rest.remove(0);
            } else if let Some(imported) = module.imports.get(&first) {
                let mut full = imported.clone();
                full.extend_from_slice(&rest[1..]);
                return self.absolute(&base, &full, depth + 1);
            } else {
                break;
            }
        }
        Some(base)
    }

    /// The module a path in `from`'s code depends on. A lone name counts only when `use`
    /// brought it in: alone, a child module's name is a variable of the same name.
    fn reference(&self, from: &ModPath, named: &[String]) -> Option<ModPath> {
        if named.len() == 1 && !self.modules.get(from)?.imports.contains_key(&named[0]) {
            return None;
        }
        self.absolute(from, named, 0)
    }

    /// For each module, the graph between its children and its own body, and the cycles in it.
    fn cycles(&self) -> Vec<String> {
        const BODY: &str = "(its own items)";
        // level → from → to → an example "module names path".
        let mut levels: BTreeMap<ModPath, BTreeMap<String, BTreeMap<String, String>>> =
            BTreeMap::new();
        for (from, module) in &self.modules {
            for named in &module.named {
                let Some(to) = self.reference(from, named) else {
                    continue;
                };
                if to == *from {
                    continue;
                }
                let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                let level: ModPath = from[..common].to_vec();
                let side = |p: &ModPath| {
                    if p.len() == common {
                        BODY.to_owned()
                    } else {
                        p[common].clone()
                    }
                };
                let (a, b) = (side(from), side(&to));
                let example = format!("{} names {}", show(from), named.join("::"));
                levels
                    .entry(level)
                    .or_default()
                    .entry(a)
                    .or_default()
                    .entry(b)
                    .or_insert(example);
            }
        }
        let mut found = Vec::new();
        for (level, graph) in &levels {
            for cycle in find_cycles(graph) {
                let steps: Vec<String> = cycle
                    .windows(2)
                    .map(|w| format!("{} → {} ({})", w[0], w[1], graph[&w[0]][&w[1]]))
                    .collect();
                found.push(format!(
                    "{}: in {}: {}",
                    self.name,
                    show(level),
                    steps.join("; ")
                ));
            }
        }
        found
    }

    /// Sibling modules under `parent` that name each other: `(from, to, example)`.
    fn sibling_edges(&self, parent: &[&str]) -> Vec<(String, String, String)> {
        let parent: ModPath = parent.iter().map(|s| (*s).to_owned()).collect();
        let mut edges = Vec::new();
        for (from, module) in &self.modules {
            if from.len() <= parent.len() || from[..parent.len()] != parent[..] {
                continue;
            }
            for named in &module.named {
                let Some(to) = self.reference(from, named) else {
                    continue;
                };
                if to.len() > parent.len()
                    && to[..parent.len()] == parent[..]
                    && to[parent.len()] != from[parent.len()]
                {
                    edges.push((
                        from[parent.len()].clone(),
                        to[parent.len()].clone(),
                        named.join("::"),
                    ));
                }
            }
        }
        edges
    }
}

fn show(path: &ModPath) -> String {
    if path.is_empty() {
        "the crate root".to_owned()
    } else {
        path.join("::")
    }
}

/// One cycle per strongly connected part of `graph` with more than one node, as a closed walk.
fn find_cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    let mut cycles = Vec::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    for start in graph.keys() {
        if reported.contains(start) {
            continue;
        }
        // Breadth-first search for the shortest way back to `start`.
        let mut previous: BTreeMap<String, String> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([start.clone()]);
        let mut closed = None;
        while let Some(node) = queue.pop_front() {
            for next in graph.get(&node).into_iter().flat_map(|m| m.keys()) {
                if next == start {
                    closed = Some(node.clone());
                    break;
                }
                if !previous.contains_key(next) {
                    previous.insert(next.clone(), node.clone());
                    queue.push_back(next.clone());
                }
            }
            if closed.is_some() {
                break;
            }
        }
        if let Some(last) = closed {
            let mut walk = vec![start.clone(), last.clone()];
            let mut at = last;
            while at != *start {
                at = previous[&at].clone();
                walk.push(at.clone());
            }
            walk.reverse();
            reported.extend(walk.iter().cloned());
            cycles.push(walk);
        }
    }
    cycles
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_owned()
}

/// Every crate of the workspace with its root files (a package may have a library and a binary).
fn workspace_crates() -> Vec<Crate> {
    let root = workspace();
    let mut dirs = vec![
        root.join("protocol"),
        root.join("linux"),
        root.join("guest-sdk"),
    ];
    for group in ["host", "plugins", "tests/plugins", "bench"] {
        for entry in std::fs::read_dir(root.join(group)).unwrap() {
            dirs.push(entry.unwrap().path());
        }
    }
    let mut crates = Vec::new();
    for dir in dirs {
        if !dir.join("Cargo.toml").exists() {
            continue;
        }
        for file in ["src/lib.rs", "src/main.rs"] {
            let path = dir.join(file);
            if path.exists() {
                let name = format!("{} ({file})", dir.strip_prefix(&root).unwrap().display());
                crates.push(Crate::read(&name, &path));
            }
        }
    }
    crates
}

#[test]
fn no_crate_has_an_import_cycle_between_its_modules() {
    let crates = workspace_crates();
    assert!(crates.len() > 10, "found only {} crates", crates.len());
    let cycles: Vec<String> = crates.iter().flat_map(Crate::cycles).collect();
    assert!(
        cycles.is_empty(),
        "import cycles between modules:\n{}",
        cycles.join("\n")
    );
}

/// A checker that finds nothing proves nothing: a small crate with a cycle, written here.
#[test]
fn a_cycle_between_modules_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lib.rs"),
        "mod a;\nmod b;\nmod c;\npub use c::Thing;\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("a.rs"),
        "use crate::b::f;\npub fn g() { f() }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.rs"),
        "pub fn f() { let _ = crate::Thing; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("c.rs"),
        "pub struct Thing;\npub fn h() { println!(\"{}\", crate::a::g()); }\n",
    )
    .unwrap();
    let found = Crate::read("example", &dir.path().join("lib.rs")).cycles();
    assert_eq!(found.len(), 1, "{found:?}");
    for step in ["a → b", "b → c", "c → a"] {
        assert!(found[0].contains(step), "{found:?}");
    }
}

#[test]
fn no_command_of_the_binary_imports_another() {
    let cli = workspace_crates()
        .into_iter()
        .find(|c| c.name == "host/cli (src/lib.rs)")
        .expect("the binary's crate");
    let edges = cli.sibling_edges(&["commands"]);
    assert!(
        edges.is_empty(),
        "command modules import each other (shared code belongs in a library crate or outside commands/):\n{}",
        edges
            .iter()
            .map(|(a, b, path)| format!("commands::{a} → commands::{b} ({path})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// How a crate may not reach another (docs/architecture.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Through its normal dependencies at any depth: it would be linked in.
    Linked,
    /// As a normal dependency of its own.
    Direct,
}

/// The rules docs/architecture.md states: (crate, what it must not reach, how).
const DEPENDENCY_RULES: &[(&str, &str, Reach)] = &[
    ("factbuoy-aggregator", "kube", Reach::Linked),
    ("factbuoy-aggregator", "wasmtime", Reach::Linked),
    ("factbuoy-aggregator", "rusqlite", Reach::Linked),
    ("factbuoy-agent", "kube", Reach::Linked),
    ("factbuoy-protocol", "wasmtime", Reach::Linked),
    ("factbuoy-protocol", "kube", Reach::Linked),
    ("factbuoy-dispatch", "factbuoy-aggregator", Reach::Linked),
    ("factbuoy-dispatch", "factbuoy-agent", Reach::Linked),
    // Plugin authoring makes and builds projects; loading and running them is the runtime's.
    ("factbuoy-authoring", "wasmtime", Reach::Linked),
    ("factbuoy-authoring", "kube", Reach::Linked),
    ("factbuoy-authoring", "factbuoy-aggregator", Reach::Linked),
    // How things are shown to people: text from what the libraries answer, never a cluster,
    // a served run or a run's planning.
    ("factbuoy-present", "kube", Reach::Linked),
    ("factbuoy-present", "factbuoy-aggregator", Reach::Linked),
    ("factbuoy-present", "factbuoy-operator", Reach::Linked),
    // The binary reaches a cluster only through factbuoy-kubernetes.
    ("factbuoy", "kube", Reach::Direct),
    ("factbuoy", "k8s-openapi", Reach::Direct),
];

/// What `cargo metadata ARGS` says of the workspace.
fn cargo_metadata(args: &[&str]) -> serde_json::Value {
    let output = std::process::Command::new(env!("CARGO"))
        .current_dir(workspace())
        .args(["metadata", "--format-version", "1", "--locked"])
        .args(args)
        .output()
        .expect("running cargo metadata");
    assert!(
        output.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Each package's normal (linked) dependencies, by package name, from `cargo metadata`.
fn normal_dependencies() -> BTreeMap<String, BTreeSet<String>> {
    let metadata = cargo_metadata(&[]);
    let name_of: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for node in metadata["resolve"]["nodes"].as_array().unwrap() {
        let deps = graph
            .entry(name_of[node["id"].as_str().unwrap()].to_owned())
            .or_default();
        for dep in node["deps"].as_array().unwrap() {
            let normal = dep["dep_kinds"]
                .as_array()
                .unwrap()
                .iter()
                .any(|k| k["kind"].is_null());
            if normal {
                deps.insert(name_of[dep["pkg"].as_str().unwrap()].to_owned());
            }
        }
    }
    graph
}

/// Each broken rule, with the chain of dependencies that breaks it.
fn broken_rules(
    graph: &BTreeMap<String, BTreeSet<String>>,
    rules: &[(&str, &str, Reach)],
) -> Vec<String> {
    let mut broken = Vec::new();
    for &(from, to, reach) in rules {
        assert!(graph.contains_key(from), "no crate {from} in the workspace");
        // Breadth first, so the chain shown is a shortest one.
        let mut previous: BTreeMap<&str, &str> = BTreeMap::new();
        let mut queue = std::collections::VecDeque::from([from]);
        while let Some(at) = queue.pop_front() {
            if at == to {
                let mut chain = vec![to];
                while let Some(before) = previous.get(chain.last().unwrap()) {
                    chain.push(before);
                }
                chain.reverse();
                broken.push(format!(
                    "{from} must not reach {to} ({reach:?}): {}",
                    chain.join(" → ")
                ));
                break;
            }
            if at != from && reach == Reach::Direct {
                continue;
            }
            for next in graph.get(at).into_iter().flatten() {
                if next != from && !previous.contains_key(next.as_str()) {
                    previous.insert(next.as_str(), at);
                    queue.push_back(next);
                }
            }
        }
    }
    broken
}

#[test]
fn every_crate_keeps_the_dependency_rules_of_the_architecture() {
    let broken = broken_rules(&normal_dependencies(), DEPENDENCY_RULES);
    assert!(
        broken.is_empty(),
        "dependencies docs/architecture.md rules out:\n{}",
        broken.join("\n")
    );
}

/// The rules' checker finds an edge that breaks one, at any depth, and only the direct one
/// where only direct dependencies are ruled out.
#[test]
fn a_broken_dependency_rule_is_found_with_its_chain() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("app", vec!["lib", "kube-wrapper"]),
        ("lib", vec!["engine"]),
        ("kube-wrapper", vec!["kube"]),
        ("engine", vec![]),
        ("kube", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.into_iter().map(str::to_owned).collect()))
    .collect();
    let broken = broken_rules(
        &graph,
        &[
            ("app", "engine", Reach::Linked),
            ("app", "kube", Reach::Direct),
            ("lib", "kube", Reach::Linked),
        ],
    );
    assert_eq!(
        broken,
        ["app must not reach engine (Linked): app → lib → engine"]
    );
    let direct = broken_rules(&graph, &[("kube-wrapper", "kube", Reach::Direct)]);
    assert_eq!(
        direct,
        ["kube-wrapper must not reach kube (Direct): kube-wrapper → kube"]
    );
}

/// The README's layout table names every folder at the top of the repository, so that a
/// newcomer finds each one explained.
#[test]
fn the_readmes_layout_table_names_every_top_level_folder() {
    let root = workspace();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let (_, layout) = readme.split_once("## Layout").expect("a Layout section");
    let tracked = std::process::Command::new("git")
        .current_dir(&root)
        .args(["ls-files"])
        .output()
        .expect("running git ls-files");
    assert!(tracked.status.success());
    let folders: BTreeSet<String> = String::from_utf8(tracked.stdout)
        .unwrap()
        .lines()
        .filter_map(|path| path.split_once('/').map(|(top, _)| top.to_owned()))
        .collect();
    assert!(folders.len() > 5, "{folders:?}");
    let missing: Vec<&String> = folders
        .iter()
        .filter(|folder| !layout.contains(&format!("| `{folder}/` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "README.md's Layout table has no row for {missing:?}"
    );
}

/// Every `.rs` file below `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// One way to run a plugin on this host (`factbuoy_agent::invoke`): the agent, `plugin run` and
/// `ansible fact-cache` all go through it, so no host crate but the runtime itself builds an
/// `Invocation` or calls `Runtime::invoke` anywhere else.
#[test]
fn one_module_outside_the_runtime_invokes_plugins() {
    let root = workspace();
    let the_one = root.join("host/agent/src/invoke.rs");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(root.join("host")).unwrap() {
        let dir = entry.unwrap().path();
        if dir.file_name().is_some_and(|n| n != "runtime") && dir.join("src").is_dir() {
            rust_files(&dir.join("src"), &mut files);
        }
    }
    assert!(files.contains(&the_one), "{} is missing", the_one.display());
    let invokes = |path: &PathBuf| {
        let text = std::fs::read_to_string(path).unwrap();
        text.contains("Invocation {") || text.contains(".invoke(")
    };
    let others: Vec<String> = files
        .iter()
        .filter(|path| **path != the_one && invokes(path))
        .map(|path| path.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(
        others.is_empty(),
        "these invoke plugins themselves instead of through factbuoy_agent::invoke: {others:?}"
    );
    assert!(
        invokes(&the_one),
        "{} no longer invokes plugins",
        the_one.display()
    );
}

/// The folders of the crates whose public types other crates import: every host crate, the
/// protocol, the Linux parsers and the SDK.
fn library_sources() -> Vec<(String, PathBuf)> {
    let root = workspace();
    let mut dirs: Vec<PathBuf> = ["protocol", "linux", "guest-sdk"]
        .iter()
        .map(|d| root.join(d))
        .collect();
    for entry in std::fs::read_dir(root.join("host")).unwrap() {
        dirs.push(entry.unwrap().path());
    }
    dirs.into_iter()
        .filter(|dir| dir.join("src").is_dir())
        .map(|dir| {
            let name = dir.strip_prefix(&root).unwrap().display().to_string();
            (name, dir.join("src"))
        })
        .collect()
}

/// Public types by name, with the crates that define one of that name. `Error` is left out: a
/// crate's own error type is `that_crate::Error` by convention.
fn public_type_names(crates: &[(String, PathBuf)]) -> BTreeMap<String, BTreeSet<String>> {
    let mut names: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, src) in crates {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        for file in files {
            for line in std::fs::read_to_string(&file).unwrap().lines() {
                let declared = ["pub struct ", "pub enum ", "pub trait ", "pub type "]
                    .iter()
                    .find_map(|keyword| line.trim_start().strip_prefix(keyword));
                let Some(rest) = declared else { continue };
                let ident: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !ident.is_empty() && ident != "Error" {
                    names.entry(ident).or_default().insert(name.clone());
                }
            }
        }
    }
    names
}

/// A name read alone says which type it is: no two crates define a public type of one name, so
/// that an import never has to be renamed (`Target as Cluster`) and a reader following names
/// across crates is not misled.
#[test]
fn no_two_crates_define_a_public_type_of_the_same_name() {
    let crates = library_sources();
    assert!(crates.len() > 10, "found only {} crates", crates.len());
    let names = public_type_names(&crates);
    assert!(names.contains_key("Runtime"), "the scan found no Runtime");
    let shared: Vec<String> = names
        .iter()
        .filter(|(_, crates)| crates.len() > 1)
        .map(|(name, crates)| format!("{name}: {crates:?}"))
        .collect();
    assert!(
        shared.is_empty(),
        "public types of the same name in several crates:\n{}",
        shared.join("\n")
    );
}

/// The test binaries `cargo metadata` knows for `package`: each one's source file (canonical)
/// and name.
fn declared_tests(package: &str) -> BTreeMap<PathBuf, String> {
    let metadata = cargo_metadata(&["--no-deps"]);
    let package = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == package)
        .unwrap_or_else(|| panic!("no package {package} in cargo metadata"));
    package["targets"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["kind"].as_array().unwrap().iter().any(|k| k == "test"))
        .map(|t| {
            let path = Path::new(t["src_path"].as_str().unwrap());
            let path = path
                .canonicalize()
                .unwrap_or_else(|e| panic!("test target {}: {e}", path.display()));
            (path, t["name"].as_str().unwrap().to_owned())
        })
        .collect()
}

/// The test files of `tests` (each `*.rs` and each `*/main.rs`) that `declared` lacks, or has
/// under another name than cargo would give it (the file's or the folder's), each saying which.
fn undeclared_test_files(tests: &Path, declared: &BTreeMap<PathBuf, String>) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(tests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for entry in entries {
        let (file, name) = if entry.is_dir() {
            (entry.join("main.rs"), entry.file_name().unwrap())
        } else if entry.extension().is_some_and(|e| e == "rs") {
            (entry.clone(), entry.file_stem().unwrap())
        } else {
            continue;
        };
        if !file.is_file() {
            continue;
        }
        let name = name.to_str().unwrap();
        let shown = file
            .strip_prefix(tests.parent().unwrap())
            .unwrap()
            .display();
        match declared.get(&file.canonicalize().unwrap()) {
            None => wrong.push(format!("{shown} is no [[test]] of host/cli/Cargo.toml")),
            Some(declared) if declared != name => wrong.push(format!(
                "{shown} is the [[test]] {declared:?} of host/cli/Cargo.toml, not {name:?}"
            )),
            Some(_) => {}
        }
    }
    wrong
}

/// Every end-to-end test file is a test binary of the `factbuoy` crate, named after its file or
/// folder: they are declared one by one in host/cli/Cargo.toml (`autotests = false`), and a file
/// left out would never run.
#[test]
fn every_test_file_is_a_declared_test_binary_of_the_binary_crate() {
    let declared = declared_tests("factbuoy");
    assert!(declared.values().any(|name| name == "all"), "{declared:?}");
    let wrong = undeclared_test_files(&workspace().join("tests"), &declared);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_test_file_left_out_or_misnamed_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let tests = dir.path().join("tests");
    for file in [
        "listed.rs",
        "left_out.rs",
        "misnamed.rs",
        "group/main.rs",
        "support/mod.rs",
    ] {
        let path = tests.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }
    std::fs::write(tests.join("notes.md"), "").unwrap();
    let declared: BTreeMap<PathBuf, String> = [
        ("listed.rs", "listed"),
        ("misnamed.rs", "other"),
        ("group/main.rs", "group"),
    ]
    .into_iter()
    .map(|(file, name)| (tests.join(file).canonicalize().unwrap(), name.to_owned()))
    .collect();
    assert_eq!(
        undeclared_test_files(&tests, &declared),
        [
            "tests/left_out.rs is no [[test]] of host/cli/Cargo.toml",
            "tests/misnamed.rs is the [[test]] \"other\" of host/cli/Cargo.toml, not \"misnamed\"",
        ]
    );
}
