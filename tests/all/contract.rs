//! The contract's released versions (docs/wit-versioning.md): each frozen in
//! `wit/since_v<version>/` and never changed, listed by the runtime as supported, the current
//! `wit/gatherer.wit` a compatible superset of each, and a plugin built against each running
//! through the real binary.

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wit_parser::{
    Function, FunctionKind, Handle, Resolve, Type, TypeDefKind, TypeId, TypeOwner, WorldKey,
};

use crate::support::{contract_fixture, frozen_contracts, workspace};

/// The digests of every file below the frozen folders, as `sha256sum` writes them.
const DIGESTS: &str = "wit/frozen.sha256";

/// Every file below `dir`, relative to `base`, in path order.
fn files_below(dir: &Path, base: &Path) -> Vec<PathBuf> {
    support::files_below(dir, &[], |_| true)
        .into_iter()
        .map(|path| path.strip_prefix(base).unwrap().to_owned())
        .collect()
}

#[test]
fn the_frozen_contracts_are_byte_for_byte_as_released() {
    let wit = workspace().join("wit");
    let recorded: BTreeMap<String, String> = std::fs::read_to_string(workspace().join(DIGESTS))
        .unwrap()
        .lines()
        .map(|line| {
            let (digest, path) = line.split_once("  ").expect("`DIGEST  PATH` lines");
            (path.to_owned(), digest.to_owned())
        })
        .collect();
    let mut found = BTreeMap::new();
    for version in frozen_contracts() {
        for file in files_below(&wit.join(format!("since_v{version}")), &wit) {
            let digest = hex::encode(Sha256::digest(std::fs::read(wit.join(&file)).unwrap()));
            found.insert(file.to_str().unwrap().to_owned(), digest);
        }
    }
    assert!(!found.is_empty(), "no frozen contract in wit/");
    for (path, digest) in &found {
        match recorded.get(path) {
            None => panic!(
                "wit/{path} has no digest in {DIGESTS}: a release records the digests of the \
                 folder it freezes (docs/wit-versioning.md, Releasing a version)"
            ),
            Some(recorded) => assert_eq!(
                recorded, digest,
                "wit/{path} is not the released text: a released contract never changes; \
                 change wit/gatherer.wit under a new version instead (docs/wit-versioning.md)"
            ),
        }
    }
    for path in recorded.keys() {
        assert!(
            found.contains_key(path),
            "wit/{path}, recorded in {DIGESTS}, is gone: a released contract is never removed \
             while the runtime supports it"
        );
    }
}

#[test]
fn the_runtime_supports_exactly_the_frozen_versions() {
    let supported: Vec<String> = factbuoy_runtime::contract::SUPPORTED
        .iter()
        .flat_map(|line| line.frozen.iter().map(|v| (*v).to_owned()))
        .collect();
    assert_eq!(
        supported,
        frozen_contracts(),
        "host/runtime/src/contract.rs SUPPORTED must list the versions frozen in wit/since_v*/"
    );
}

/// A contract read with wit-parser: the resolve and its one package.
struct Contract {
    resolve: Resolve,
    package: wit_parser::PackageId,
}

impl Contract {
    fn read(dir: &Path) -> Contract {
        let mut resolve = Resolve::new();
        let (package, _) = resolve
            .push_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e:?}", dir.display()));
        Contract { resolve, package }
    }

    fn name(&self) -> &wit_parser::PackageName {
        &self.resolve.packages[self.package].name
    }

    /// A type as it is written in a signature: named types by their interface and name.
    fn ty(&self, ty: &Type) -> String {
        match ty {
            Type::Id(id) => self.type_def(*id, false),
            primitive => format!("{primitive:?}").to_lowercase(),
        }
    }

    fn optional(&self, ty: &Option<Type>) -> String {
        ty.as_ref().map_or("_".to_owned(), |t| self.ty(t))
    }

    /// A type definition; named types are spelled out only when `expand` is set.
    fn type_def(&self, id: TypeId, expand: bool) -> String {
        let def = &self.resolve.types[id];
        if let (Some(name), false) = (&def.name, expand) {
            let owner = match def.owner {
                TypeOwner::Interface(i) => self.resolve.interfaces[i].name.clone(),
                TypeOwner::World(w) => Some(self.resolve.worlds[w].name.clone()),
                TypeOwner::None => None,
            };
            return format!("{}.{name}", owner.unwrap_or_default());
        }
        let list = |items: Vec<String>| items.join(", ");
        match &def.kind {
            TypeDefKind::Record(r) => format!(
                "record {{ {} }}",
                list(
                    r.fields
                        .iter()
                        .map(|f| format!("{}: {}", f.name, self.ty(&f.ty)))
                        .collect()
                )
            ),
            TypeDefKind::Resource => "resource".to_owned(),
            TypeDefKind::Handle(Handle::Own(t)) => format!("own<{}>", self.type_def(*t, false)),
            TypeDefKind::Handle(Handle::Borrow(t)) => {
                format!("borrow<{}>", self.type_def(*t, false))
            }
            TypeDefKind::Flags(f) => format!(
                "flags {{ {} }}",
                list(f.flags.iter().map(|f| f.name.clone()).collect())
            ),
            TypeDefKind::Tuple(t) => format!(
                "tuple<{}>",
                list(t.types.iter().map(|t| self.ty(t)).collect())
            ),
            TypeDefKind::Variant(v) => format!(
                "variant {{ {} }}",
                list(
                    v.cases
                        .iter()
                        .map(|c| format!("{}({})", c.name, self.optional(&c.ty)))
                        .collect()
                )
            ),
            TypeDefKind::Enum(e) => format!(
                "enum {{ {} }}",
                list(e.cases.iter().map(|c| c.name.clone()).collect())
            ),
            TypeDefKind::Option(t) => format!("option<{}>", self.ty(t)),
            TypeDefKind::Result(r) => {
                format!(
                    "result<{}, {}>",
                    self.optional(&r.ok),
                    self.optional(&r.err)
                )
            }
            TypeDefKind::List(t) => format!("list<{}>", self.ty(t)),
            TypeDefKind::Map(k, v) => format!("map<{}, {}>", self.ty(k), self.ty(v)),
            TypeDefKind::FixedLengthList(t, n) => format!("list<{}, {n}>", self.ty(t)),
            TypeDefKind::Future(t) => format!("future<{}>", self.optional(t)),
            TypeDefKind::Stream(t) => format!("stream<{}>", self.optional(t)),
            TypeDefKind::Type(t) => self.ty(t),
            TypeDefKind::Unknown => "unknown".to_owned(),
        }
    }

    /// A function's signature; its name already says whether it is a method of a resource.
    fn function(&self, f: &Function) -> String {
        let params = f
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, self.ty(&p.ty)))
            .collect::<Vec<_>>()
            .join(", ");
        let asynchronous = match f.kind {
            FunctionKind::AsyncFreestanding
            | FunctionKind::AsyncMethod(_)
            | FunctionKind::AsyncStatic(_) => "async ",
            _ => "",
        };
        format!(
            "{}: {asynchronous}func({params}) -> {}",
            f.name,
            self.optional(&f.result)
        )
    }

    /// Every interface by name: its types and functions by name, each spelled out.
    fn interfaces(&self) -> BTreeMap<String, Interface> {
        let package = &self.resolve.packages[self.package];
        package
            .interfaces
            .iter()
            .map(|(name, id)| {
                let interface = &self.resolve.interfaces[*id];
                let types = interface
                    .types
                    .iter()
                    .map(|(name, id)| (name.clone(), self.type_def(*id, true)))
                    .collect();
                let functions = interface
                    .functions
                    .iter()
                    .map(|(name, f)| (name.clone(), self.function(f)))
                    .collect();
                (name.clone(), Interface { types, functions })
            })
            .collect()
    }

    /// Every world by name: the names it imports and the names it exports.
    fn worlds(&self) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
        let key = |key: &WorldKey| match key {
            WorldKey::Name(name) => name.clone(),
            WorldKey::Interface(id) => self.resolve.interfaces[*id].name.clone().unwrap(),
        };
        self.resolve.packages[self.package]
            .worlds
            .iter()
            .map(|(name, id)| {
                let world = &self.resolve.worlds[*id];
                let imports = world.imports.keys().map(key).collect();
                let exports = world.exports.keys().map(key).collect();
                (name.clone(), (imports, exports))
            })
            .collect()
    }
}

struct Interface {
    types: BTreeMap<String, String>,
    functions: BTreeMap<String, String>,
}

/// What keeps a plugin built against `frozen` running on a host built from `current`, each
/// broken rule as one line.
fn incompatibilities(frozen: &Contract, current: &Contract) -> Vec<String> {
    let mut problems = Vec::new();
    let (old, new) = (frozen.name(), current.name());
    if (&old.namespace, &old.name) != (&new.namespace, &new.name) {
        problems.push(format!("the package is {new}, not {old}"));
    }
    match (&old.version, &new.version) {
        (Some(old), Some(new)) => {
            // Within 0.x the minor version is the breaking one, as in Cargo.
            let line = |major: u64, minor: u64| (major, if major == 0 { minor } else { 0 });
            if new < old || line(new.major, new.minor) != line(old.major, old.minor) {
                problems.push(format!(
                    "version {new} is not a compatible successor of {old} (same major, or same \
                     minor within 0.x, and not older)"
                ));
            }
        }
        _ => problems.push("a package without a version".to_owned()),
    }
    let (old_worlds, new_worlds) = (frozen.worlds(), current.worlds());
    let exported: Vec<&String> = old_worlds.values().flat_map(|(_, e)| e).collect();
    for (name, (imports, exports)) in &old_worlds {
        let Some((new_imports, new_exports)) = new_worlds.get(name) else {
            problems.push(format!("world {name} is gone"));
            continue;
        };
        for import in imports.iter().filter(|i| !new_imports.contains(i)) {
            problems.push(format!("world {name} no longer imports {import}"));
        }
        if exports != new_exports {
            problems.push(format!(
                "world {name} exports {new_exports:?}, not {exports:?}: old plugins export only \
                 what they were built with"
            ));
        }
    }
    let new_interfaces = current.interfaces();
    for (name, old) in frozen.interfaces() {
        let Some(new) = new_interfaces.get(&name) else {
            problems.push(format!("interface {name} is gone"));
            continue;
        };
        for (kind, old_items, new_items) in [
            ("type", &old.types, &new.types),
            ("function", &old.functions, &new.functions),
        ] {
            for (item, signature) in old_items {
                match new_items.get(item) {
                    None => problems.push(format!("{kind} {name}.{item} is gone")),
                    Some(now) if now != signature => problems.push(format!(
                        "{kind} {name}.{item} changed from `{signature}` to `{now}`"
                    )),
                    Some(_) => {}
                }
            }
        }
        // An old plugin's export has only the functions it was built with.
        if exported.contains(&&name) {
            for added in new
                .functions
                .keys()
                .filter(|f| !old.functions.contains_key(*f))
            {
                problems.push(format!("exported interface {name} gained function {added}"));
            }
        }
    }
    problems
}

#[test]
fn the_current_contract_is_a_compatible_superset_of_every_frozen_one() {
    let wit = workspace().join("wit");
    let current = Contract::read(&wit);
    let versions = frozen_contracts();
    let current_version = current.name().version.clone().expect("a versioned package");
    for version in &versions {
        let frozen = Contract::read(&wit.join(format!("since_v{version}")));
        assert_eq!(
            frozen.name().version.as_ref().map(ToString::to_string),
            Some(version.clone()),
            "wit/since_v{version}/ holds {}",
            frozen.name()
        );
        // An older line is served by bindings of its own (docs/wit-versioning.md), not by
        // this text.
        if factbuoy_runtime::contract::line_for(version)
            != factbuoy_runtime::contract::line_for(&current_version.to_string())
        {
            continue;
        }
        let problems = incompatibilities(&frozen, &current);
        assert!(
            problems.is_empty(),
            "wit/gatherer.wit breaks plugins built against {version} \
             (docs/wit-versioning.md, Compatibility rules):\n{}",
            problems.join("\n")
        );
    }
    // Until a change is made, the current contract is the newest release, text and all.
    let newest = versions.last().expect("at least one frozen contract");
    if current.name().version.as_ref().map(ToString::to_string) == Some(newest.clone()) {
        assert_eq!(
            std::fs::read_to_string(wit.join("gatherer.wit")).unwrap(),
            std::fs::read_to_string(wit.join(format!("since_v{newest}/gatherer.wit"))).unwrap(),
            "wit/gatherer.wit still says {newest} but differs from wit/since_v{newest}/: a \
             change to the contract takes a new version (docs/wit-versioning.md)"
        );
    }
}

#[test]
fn a_contract_that_breaks_a_frozen_one_is_caught() {
    let wit = workspace().join("wit");
    let newest = frozen_contracts().pop().unwrap();
    let text = std::fs::read_to_string(wit.join(format!("since_v{newest}/gatherer.wit"))).unwrap();
    let broken = tempfile::tempdir().unwrap();
    // A changed signature, a removed function and an addition to the exported interface.
    let edited = text
        .replacen(
            "uptime-seconds: func() -> u64;",
            "uptime-seconds: func() -> u32;",
            1,
        )
        .replacen("tz-variable: func() -> option<string>;", "", 1)
        .replacen("gather: func(", "added: func();\n    gather: func(", 1);
    assert_ne!(edited, text, "the edits must apply");
    std::fs::write(broken.path().join("gatherer.wit"), edited).unwrap();
    let problems = incompatibilities(
        &Contract::read(&wit.join(format!("since_v{newest}"))),
        &Contract::read(broken.path()),
    );
    assert_eq!(
        problems,
        [
            "function host-info.tz-variable is gone",
            "function host-info.uptime-seconds changed from `uptime-seconds: func() -> u64` \
             to `uptime-seconds: func() -> u32`",
            "exported interface plugin gained function added",
        ]
    );
}

#[test]
fn every_frozen_contract_has_a_fixture_built_against_it() {
    let plugins = workspace().join("tests/plugins");
    let versions = frozen_contracts();
    for version in &versions {
        let name = contract_fixture(version);
        let source = plugins.join(&name).join("src/lib.rs");
        let text = std::fs::read_to_string(&source).unwrap_or_else(|_| {
            panic!(
                "wit/since_v{version}/ has no fixture: add tests/plugins/{name}, a plugin built \
                 against it that calls what {version} added, and its check in \
                 tests/all/contract.rs (docs/wit-versioning.md, Releasing a version)"
            )
        });
        assert!(
            text.contains(&format!("path: \"../../../wit/since_v{version}\"")),
            "{} must be built against wit/since_v{version}/",
            source.display()
        );
    }
    for entry in std::fs::read_dir(&plugins).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.starts_with("contract-") {
            assert!(
                versions.iter().any(|v| contract_fixture(v) == name),
                "tests/plugins/{name} has no frozen contract in wit/"
            );
        }
    }
}

/// `plugin run FIXTURE ARGS -o json` for the fixture of frozen `version`, which must succeed:
/// the content of its one artifact.
fn run_fixture(version: &str, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
    let output = support::factbuoy()
        .args(["plugin", "run"])
        .arg(support::fixture(&contract_fixture(version)))
        .args(args)
        .args(["-o", "json"])
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{version}: {stderr}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["succeeded"], true, "{version}: {report}");
    report["artifacts"][0]["content"].clone()
}

#[test]
fn a_plugin_built_against_every_frozen_contract_runs() {
    // Each fixture's imports and export are named with its own version; this host implements
    // the newest, and links them by semver.
    for version in frozen_contracts() {
        match version.as_str() {
            "0.1.0" => {
                // The text "<seconds>" reads as a JSON number in the report.
                let content = run_fixture(&version, &["--grant", "host-info"], &[]);
                assert!(content.is_u64(), "{content}");
            }
            "0.1.1" => {
                let dir = tempfile::tempdir().unwrap();
                let link = dir.path().join("link");
                std::os::unix::fs::symlink("/absolute/target", &link).unwrap();
                let content = run_fixture(
                    &version,
                    &[
                        "--grant",
                        "host-info",
                        "--grant",
                        &format!("read:{}", dir.path().display()),
                        "-p",
                        &format!("link={}", link.display()),
                    ],
                    &[("TZ", "Europe/Paris")],
                );
                assert_eq!(
                    content,
                    serde_json::json!({
                        "tz": "Europe/Paris",
                        "link": {"target": "/absolute/target"},
                    })
                );
            }
            "0.1.2" => {
                let content = run_fixture(&version, &["--grant", "host-info"], &[]);
                assert_eq!(
                    content,
                    serde_json::json!({
                        "interface": "fbnosuchif0",
                        "features": "no-such-interface",
                        "timestamping": "no-such-interface",
                    })
                );
            }
            "0.2.0" => {
                let output = support::factbuoy()
                    .args(["plugin", "info"])
                    .arg(support::fixture(&contract_fixture(&version)))
                    .args(["-o", "json"])
                    .output()
                    .unwrap();
                assert!(output.status.success(), "{output:?}");
                let info: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
                assert_eq!(
                    info["artifacts"],
                    serde_json::json!([
                        {"name": "facts.json", "media_type": "application/json",
                         "description": "a facts document with a keyed list", "kind": "facts",
                         "list_keys": [{"path": "things", "keys": ["id"]}]},
                        {"name": "rows.jsonl", "media_type": "application/jsonl",
                         "description": "a table keyed by name", "kind": "table",
                         "row_keys": ["name"]},
                    ])
                );
                let content = run_fixture(&version, &[], &[]);
                assert_eq!(content["things"][1]["id"], "b", "{content}");
            }
            other => panic!(
                "no check of tests/plugins/{}: add one here that sees what {other} added work",
                contract_fixture(other)
            ),
        }
    }
}

/// A page that names a contract version as `factbuoy:plugin@V` (or `factbuoy:plugin/NAME@V`)
/// names the one the binary speaks: a version copied into a page drifts (the README said 0.1.2
/// long after 0.2.0). Pages that need no number say "the contract" and leave it to `factbuoy
/// version`.
#[test]
fn the_contract_version_every_page_names_is_the_one_the_binary_speaks() {
    // Named on purpose: a version no factbuoy supports, in the refusal it gets, and the next
    // breaking line in the steps that make it.
    const NOT_CURRENT: &[(&str, &str)] = &[
        ("docs/wit-versioning.md", "9.0.0"),
        ("docs/wit-versioning.md", "0.3.0"),
    ];
    let output = support::factbuoy()
        .args(["version", "-o", "json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let version: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let current = version["contract"]
        .as_str()
        .expect("version names its contract");
    let root = workspace();
    let pages = support::files_below(&root, &["target", "node_modules", ".git"], |path| {
        path.extension().is_some_and(|e| e == "md")
    });
    let mut named = 0;
    let mut wrong = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let relative = page.strip_prefix(&root).unwrap().to_string_lossy();
        for (start, _) in text.match_indices("factbuoy:plugin") {
            let rest = &text[start + "factbuoy:plugin".len()..];
            let rest = rest.strip_prefix('/').map_or(rest, |r| {
                r.trim_start_matches(|c: char| c.is_ascii_lowercase() || c == '-')
            });
            let Some(rest) = rest.strip_prefix('@') else {
                continue;
            };
            let version = rest
                .split(|c: char| !(c.is_ascii_digit() || c == '.'))
                .next()
                .unwrap()
                .trim_end_matches('.');
            // `factbuoy:plugin/plugin@…`: a pattern, not a version.
            if version.is_empty() {
                continue;
            }
            named += 1;
            if version != current && !NOT_CURRENT.contains(&(relative.as_ref(), version)) {
                wrong.push(format!("{relative}: factbuoy:plugin…@{version}"));
            }
        }
    }
    assert!(named > 0, "no page names the contract's version");
    assert!(
        wrong.is_empty(),
        "the binary speaks factbuoy:plugin@{current}; these pages name another version: {}",
        wrong.join(", ")
    );
}
