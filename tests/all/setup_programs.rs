//! The facts Ansible gets by running programs (`ethtool`, `lspci`, `vgs`/`lvs`/`pvs`, `dpkg`),
//! which the `setup` plugin computes from what those programs read: each test runs the real
//! program on this machine, parses its output as Ansible's setup module does, and compares
//! with the real `factbuoy` binary's facts. Where the program is not installed, Ansible
//! reports nothing from it, and neither may the plugin.

use crate::support;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde_json::{Map, Value, json};

/// `factbuoy plugin run setup -o json` with extra arguments, run through `wrapper` (`ip netns
/// exec NS`, `unshare -n`) when there is one: exit code, report, facts.
fn run_setup_via(wrapper: &[&str], args: &[&str]) -> (i32, Value, Value) {
    let factbuoy = env!("CARGO_BIN_EXE_factbuoy");
    let mut command = match wrapper.split_first() {
        Some((program, wrapper_args)) => {
            let mut c = Command::new(program);
            c.args(wrapper_args).arg(factbuoy);
            c
        }
        None => Command::new(factbuoy),
    };
    let output = command
        .args(["plugin", "run", "setup", "-o", "json"])
        .args(args)
        .env("FACTBUOY_CACHE_DIR", support::cache_dir())
        .output()
        .expect("running factbuoy");
    support::setup_report(&output)
}

fn run_setup(args: &[&str]) -> (i32, Value, Value) {
    run_setup_via(&[], args)
}

/// The `ip netns exec NS` prefix, or nothing.
fn in_netns(netns: Option<&str>) -> Vec<&str> {
    netns
        .map(|ns| vec!["ip", "netns", "exec", ns])
        .unwrap_or_default()
}

/// Where Ansible's `get_bin_path` finds a program: `PATH`, then the sbin directories.
fn find_program(name: &str) -> Option<String> {
    let path = std::env::var("PATH").unwrap_or_default();
    path.split(':')
        .chain(["/sbin", "/usr/sbin", "/usr/local/sbin"])
        .map(|dir| format!("{dir}/{name}"))
        .find(|candidate| Path::new(candidate).is_file())
}

/// A program's standard output, run through `wrapper` (see [`run_setup_via`]), or `None` when
/// it failed (Ansible checks `rc == 0`).
fn output_of(wrapper: &[&str], program: &str, args: &[&str]) -> Option<String> {
    let (first, rest) = match wrapper.split_first() {
        Some((first, rest)) => (*first, [rest, &[program]].concat()),
        None => (program, Vec::new()),
    };
    let output = Command::new(first).args(rest).args(args).output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

/// What Ansible's `get_ethtool_data` makes of `ethtool -k` and `ethtool -T`.
fn ansible_ethtool_data(netns: Option<&str>, ethtool: &str, device: &str) -> Map<String, Value> {
    let mut data = Map::new();
    if let Some(text) = output_of(&in_netns(netns), ethtool, &["-k", device]) {
        let mut features = Map::new();
        for line in text.trim().lines() {
            if line.is_empty() || line.ends_with(':') {
                continue;
            }
            let (key, value) = line.split_once(": ").expect("`key: value` lines");
            if !value.is_empty() {
                features.insert(key.trim().replace('-', "_"), value.trim().into());
            }
        }
        data.insert("features".into(), features.into());
    }
    if let Some(text) = output_of(&in_netns(netns), ethtool, &["-T", device]) {
        let names = |prefix: &str| -> Vec<Value> {
            text.split(prefix)
                .skip(1)
                .map(|rest| {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    name.to_lowercase().into()
                })
                .collect()
        };
        data.insert("timestamping".into(), names("SOF_TIMESTAMPING_").into());
        data.insert(
            "hw_timestamp_filters".into(),
            names("HWTSTAMP_FILTER_").into(),
        );
        if let Some(index) = text
            .lines()
            .find_map(|l| l.strip_prefix("PTP Hardware Clock: "))
            .and_then(|i| i.trim().parse::<u64>().ok())
        {
            data.insert("phc_index".into(), index.into());
        }
    }
    data
}

/// Every interface's ethtool facts equal what the real ethtool prints, parsed as Ansible
/// parses it; none at all without ethtool.
fn assert_ethtool_facts(netns: Option<&str>) -> usize {
    let (code, report, facts) =
        run_setup_via(&in_netns(netns), &["-p", "gather_subset=!all,!min,network"]);
    assert_eq!(code, 0, "{report}");
    let interfaces = facts["ansible_interfaces"]
        .as_array()
        .expect("ansible_interfaces")
        .clone();
    assert!(!interfaces.is_empty(), "{facts}");
    let ethtool = find_program("ethtool");
    for name in &interfaces {
        let name = name.as_str().unwrap();
        let fact = &facts[format!("ansible_{}", name.replace('-', "_"))];
        let expected = match &ethtool {
            Some(ethtool) => ansible_ethtool_data(netns, ethtool, name),
            None => Map::new(),
        };
        for key in [
            "features",
            "timestamping",
            "hw_timestamp_filters",
            "phc_index",
        ] {
            assert_eq!(
                fact.get(key),
                expected.get(key),
                "{name}.{key} (ethtool: {ethtool:?})"
            );
        }
    }
    interfaces.len()
}

#[test]
fn interface_features_and_time_stamping_are_what_ethtool_prints() {
    assert_ethtool_facts(None);
}

/// A network namespace of this test's own, removed when dropped.
struct Netns(String);

impl Netns {
    fn new() -> Option<Self> {
        let name = format!("factbuoy-test-{}", std::process::id());
        let made = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .is_ok_and(|s| s.success());
        made.then(|| Netns(name))
    }

    fn ip(&self, args: &[&str]) -> bool {
        Command::new("ip")
            .args(["-n", &self.0])
            .args(args)
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.0])
            .status();
    }
}

/// A veth pair has many more features than `lo`, some changeable: one switched off, so
/// that the features that depend on it show `[requested on]`.
#[test]
fn a_veth_pair_in_a_namespace_of_its_own_matches_ethtool() {
    let Some(ns) = Netns::new() else {
        eprintln!("skipped: this machine does not allow a network namespace (`ip netns add`)");
        return;
    };
    assert!(ns.ip(&[
        "link", "add", "fbveth0", "type", "veth", "peer", "name", "fbveth1"
    ]));
    assert!(ns.ip(&["link", "set", "fbveth0", "up"]));
    if let Some(ethtool) = find_program("ethtool") {
        // Without transmit checksums, TCP segmentation cannot stay on: `[requested on]`.
        let off = output_of(
            &in_netns(Some(&ns.0)),
            &ethtool,
            &["-K", "fbveth0", "tx", "off"],
        );
        assert!(off.is_some(), "ethtool -K fbveth0 tx off");
        let listing = output_of(&in_netns(Some(&ns.0)), &ethtool, &["-k", "fbveth0"]).unwrap();
        assert!(listing.contains("[requested on]"), "{listing}");
    }
    assert_eq!(assert_ethtool_facts(Some(&ns.0)), 3);
}

/// `ansible_devices.*.host`: what `lspci -D` prints for the PCI device a disk hangs off.
#[test]
fn disk_controllers_are_what_lspci_prints() {
    let (code, report, facts) = run_setup(&["-p", "gather_subset=!all,!min,devices"]);
    assert_eq!(code, 0, "{report}");
    let lspci = find_program("lspci");
    let mut compared = 0;
    for (name, device) in facts["ansible_devices"].as_object().expect("devices") {
        let sysfs = std::fs::canonicalize(format!("/sys/block/{name}")).unwrap();
        let sysfs = sysfs.to_string_lossy();
        // Ansible's pattern: the last PCI address in the path that more of the path follows.
        let address = sysfs
            .rsplit('/')
            .skip(1)
            .find(|part| {
                part.len() == 12 && part.as_bytes()[4] == b':' && part.as_bytes()[10] == b'.'
            })
            .map(str::to_owned);
        let expected = match (&lspci, &address) {
            (Some(lspci), Some(address)) => {
                compared += 1;
                let line = output_of(&[], lspci, &["-D", "-s", address]).expect("lspci");
                line.trim_end()
                    .strip_prefix(&format!("{address} "))
                    .unwrap_or_else(|| panic!("lspci -D -s {address} printed {line:?}"))
                    .to_owned()
            }
            _ => String::new(),
        };
        assert_eq!(device["host"], expected, "{name} at {sysfs}");
    }
    if compared == 0 {
        eprintln!(
            "note: no disk on a PCI device with lspci installed here; only empty hosts compared"
        );
    }
}

/// `ansible_lvm`: what `vgs`, `lvs` and `pvs` print as Ansible runs them, as root; `N/A`
/// without LVM or as another user. CI makes a volume group on a loop device first
/// (`tests/ansible/lvm-loop.sh`), so that there is one to compare.
#[test]
fn lvm_is_what_vgs_lvs_and_pvs_print() {
    let (code, report, facts) = run_setup(&["-p", "gather_subset=!all,!min,hardware"]);
    assert_eq!(code, 0, "{report}");
    let root = std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().next().map(|u| u == "0"))
        .unwrap();
    let Some(vgs) = find_program("vgs").filter(|_| root) else {
        assert_eq!(facts["ansible_lvm"], "N/A");
        return;
    };
    let rows = |program: &str| -> Vec<Vec<String>> {
        let program = find_program(program).unwrap_or_else(|| panic!("{program} beside {vgs}"));
        let output = Command::new(program)
            .args([
                "--noheadings",
                "--nosuffix",
                "--units",
                "g",
                "--separator",
                ",",
            ])
            .env("LVM_SUPPRESS_FD_WARNINGS", "1")
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .map(|line| line.trim().split(',').map(str::to_owned).collect())
            .collect()
    };
    let mut expected = BTreeMap::new();
    let mut groups = Map::new();
    for items in rows("vgs") {
        let n = items.len();
        groups.insert(
            items[0].clone(),
            json!({"size_g": items[n - 2], "free_g": items[n - 1],
                   "num_lvs": items[2], "num_pvs": items[1]}),
        );
    }
    let mut volumes = Map::new();
    for items in rows("lvs") {
        volumes.insert(
            items[0].clone(),
            json!({"size_g": items[3], "vg": items[1]}),
        );
    }
    let mut physical = Map::new();
    for items in rows("pvs") {
        physical.insert(
            items[0].clone(),
            json!({"size_g": items[4], "free_g": items[5], "vg": items[1]}),
        );
    }
    expected.insert("vgs", Value::from(groups));
    expected.insert("lvs", Value::from(volumes));
    expected.insert("pvs", Value::from(physical));
    assert_eq!(facts["ansible_lvm"], json!(expected));
}

/// Debian testing and sid name no release in os-release; Ansible then cuts it from tzdata's
/// `Provides:` in `dpkg --status tzdata`. The same database, below a host root, read by the
/// plugin and by the real dpkg.
#[test]
fn debians_release_is_cut_from_dpkgs_status_as_ansible_cuts_it() {
    let Some(dpkg) = find_program("dpkg") else {
        eprintln!("skipped: no dpkg on this machine to compare with");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let put = |path: &str, content: &str| {
        let full = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    };
    put(
        "/etc/os-release",
        "PRETTY_NAME=\"Debian GNU/Linux bullseye/sid\"\nNAME=\"Debian GNU/Linux\"\nID=debian\n",
    );
    put("/etc/debian_version", "bullseye/sid\n");
    put(
        "/var/lib/dpkg/status",
        "Package: base-files\nStatus: install ok installed\nVersion: 11\nProvides: base\n\n\
         Package: tzdata\nStatus: install ok installed\nPriority: required\n\
         Architecture: all\nVersion: 2021a-1\nProvides: tzdata-bullseye\n\
         Description: time zone and daylight-saving time data\n\n",
    );
    let release = |root: &Path| {
        let (code, report, facts) = run_setup(&[
            "--root",
            root.to_str().unwrap(),
            "-p",
            "gather_subset=!all,!min,distribution",
        ]);
        assert_eq!(code, 0, "{report}");
        facts["ansible_distribution_release"].clone()
    };
    // No dpkg below the root: Ansible would not ask, and the release stays unknown.
    assert_eq!(release(root), "NA");

    put("/usr/bin/dpkg", "");
    // Ansible's own pipeline, with the real dpkg reading the database below the root.
    let admindir = root.join("var/lib/dpkg");
    let pipeline = format!(
        "{dpkg} --admindir={} --status tzdata|grep Provides|cut -f2 -d'-'",
        admindir.display()
    );
    let expected = output_of(&[], "sh", &["-c", &pipeline])
        .unwrap()
        .trim()
        .to_owned();
    assert_eq!(expected, "bullseye");
    assert_eq!(release(root), expected);
}

/// In a pod without `hostNetwork`, the node's interfaces are listed from its `/sys` but are
/// not in the agent's network namespace: their ethtool facts are left out, and the warnings say
/// which facts are factbuoy's own namespace's and which interfaces lack ethtool facts.
/// `unshare -n` makes that situation (a new namespace, the same `/sys`).
#[test]
fn interfaces_outside_the_network_namespace_are_named_in_a_warning() {
    if find_program("ethtool").is_none() {
        eprintln!("skipped: without ethtool there are no ethtool facts to miss");
        return;
    }
    if output_of(&[], "unshare", &["-n", "true"]).is_none() {
        eprintln!("skipped: this machine does not allow a network namespace (unshare -n)");
        return;
    }
    let (code, report, facts) = run_setup_via(
        &["unshare", "-n"],
        &["-p", "gather_subset=!all,!min,network,platform"],
    );
    assert_eq!(code, 0, "{report}");
    let warnings = report["warnings"].to_string();
    assert!(
        warnings.contains("factbuoy runs in another network namespace than the host root's")
            && warnings.contains("without hostNetwork")
            && warnings.contains("ansible_default_ipv4")
            && warnings.contains("ansible_nodename"),
        "{warnings}"
    );
    let mut outside = Vec::new();
    for name in facts["ansible_interfaces"].as_array().unwrap() {
        let name = name.as_str().unwrap();
        let fact = &facts[format!("ansible_{}", name.replace('-', "_"))];
        // Every namespace has its own `lo`.
        if name == "lo" {
            assert!(fact["features"].is_object(), "{fact}");
            continue;
        }
        assert!(fact.get("features").is_none(), "{name}: {fact}");
        assert!(fact.get("timestamping").is_none(), "{name}: {fact}");
        outside.push(name);
    }
    if outside.is_empty() {
        eprintln!("note: this machine has no interface but lo; nothing was outside");
        return;
    }
    outside.sort();
    let listed = outside
        .iter()
        .take(8)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    assert!(
        warnings.contains(&listed) && warnings.contains("not in factbuoy's network namespace, so"),
        "{warnings}"
    );
}

/// In the host's own network namespace nothing is said about namespaces, and no interface
/// lacks its ethtool facts.
#[test]
fn in_the_hosts_network_namespace_no_namespace_warning() {
    if find_program("ethtool").is_none() {
        eprintln!("skipped: without ethtool there are no ethtool facts to miss");
        return;
    }
    let (code, report, facts) =
        run_setup_via(&[], &["-p", "gather_subset=!all,!min,network,platform"]);
    assert_eq!(code, 0, "{report}");
    let warnings = report["warnings"].to_string();
    assert!(!warnings.contains("network namespace"), "{warnings}");
    for name in facts["ansible_interfaces"].as_array().unwrap() {
        let fact = &facts[format!("ansible_{}", name.as_str().unwrap().replace('-', "_"))];
        assert!(fact["features"].is_object(), "{name}: {fact}");
    }
}

/// LVM below a host root, from the metadata and listings the real LVM tools made
/// (`guest-sdk/testdata/lvm`): one of the group's two disks is there, the other is not, as
/// `pvs` shows a group with a missing disk; a backup with no disk at all is left out, and one
/// `vgremove` left behind leaves only its orphan disks.
#[test]
fn lvm_below_a_root_counts_only_the_disks_that_are_there() {
    let testdata = support::workspace().join("guest-sdk/testdata/lvm");
    let read = |name: &str| std::fs::read_to_string(testdata.join(name)).unwrap();
    let rows = |name: &str| -> Vec<Vec<String>> {
        read(name)
            .lines()
            .map(|l| l.trim().split(',').map(str::to_owned).collect())
            .collect()
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let put = |path: &str, content: &str| {
        let full = root.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, content).unwrap();
    };
    put("/etc/lvm/backup/fixture", &read("fixture.vg"));
    // The same group renamed, on disks that are all gone.
    put(
        "/etc/lvm/backup/gone",
        &read("fixture.vg")
            .replacen("fixture {", "gone {", 1)
            .replace("/dev/loop", "/dev/vanished"),
    );
    // A group `vgremove` removed (LVM leaves its last backup): of its disks, one is still
    // there, an orphan that `pvs` lists whole and free; the other is gone.
    let description = read("fixture.vg")
        .lines()
        .find(|l| l.starts_with("description = "))
        .unwrap()
        .to_owned();
    put(
        "/etc/lvm/backup/old",
        &read("fixture.vg")
            .replacen("fixture {", "old {", 1)
            .replace(
                &description,
                "description = \"Created *after* executing 'vgremove -y old'\"",
            )
            .replace("QIU6iD", "OLDiD1")
            .replace("cUELh8", "OLDiD2")
            .replace("/dev/loop1", "/dev/loop9")
            .replace("/dev/loop2", "/dev/vanished2"),
    );
    put("/sys/class/block/loop9/size", "131072\n");
    for program in ["vgs", "lvs", "pvs"] {
        put(&format!("/usr/sbin/{program}"), "");
    }
    put("/proc/self/status", "Name:\tfactbuoy\nUid:\t0\t0\t0\t0\n");
    // The first disk of the backup (its `device` hint) is there, the second is not.
    let pvs = rows("fixture.pvs");
    let first = pvs[0][0].trim_start_matches("/dev/");
    put(&format!("/sys/class/block/{first}/size"), "81920\n");

    let (code, report, facts) = run_setup(&[
        "--root",
        root.to_str().unwrap(),
        "-p",
        "gather_subset=!all,!min,hardware",
    ]);
    assert_eq!(code, 0, "{report}");
    let vgs = &rows("fixture.vgs")[0];
    let mut lvs = Map::new();
    for lv in rows("fixture.lvs") {
        lvs.insert(lv[0].clone(), json!({"size_g": lv[3], "vg": "fixture"}));
    }
    let pv = |row: &Vec<String>| json!({"size_g": row[4], "free_g": row[5], "vg": "fixture"});
    assert_eq!(
        facts["ansible_lvm"],
        json!({
            "vgs": {"fixture": {"size_g": vgs[5], "free_g": vgs[6], "num_lvs": vgs[2], "num_pvs": vgs[1]}},
            "lvs": lvs,
            "pvs": {
                pvs[0][0].clone(): pv(&pvs[0]),
                "[unknown]": pv(&pvs[1]),
                "/dev/loop9": {"size_g": "0.06", "free_g": "0.06", "vg": ""},
            },
        })
    );
}

/// Without `/sys/devices/virtual/dmi/id`, Ansible runs `dmidecode -s`: its output without
/// comment lines when it succeeds, `NA` when it fails or is not installed. The plugin cannot
/// run it and reports `NA`, which is right wherever dmidecode fails too: on a kernel without
/// DMI in sysfs it can only scan `/dev/mem`, which a VM without SMBIOS (or a container) lacks.
/// On a machine where dmidecode answers nonetheless, this test fails, as it should: the facts
/// then differ from Ansible's.
#[test]
fn dmi_facts_without_sysfs_are_what_dmidecode_gives_ansible() {
    if Path::new("/sys/devices/virtual/dmi/id/product_name").exists() {
        eprintln!("skipped: this machine has DMI in sysfs, which both read (compare.sh compares)");
        return;
    }
    let (code, report, facts) = run_setup(&["-p", "gather_subset=!all,!min,hardware"]);
    assert_eq!(code, 0, "{report}");
    for (fact, keyword) in [
        ("ansible_system_vendor", "system-manufacturer"),
        ("ansible_product_name", "system-product-name"),
        ("ansible_bios_version", "bios-version"),
    ] {
        let expected = find_program("dmidecode")
            .and_then(|dmidecode| output_of(&[], &dmidecode, &["-s", keyword]))
            .map(|out| {
                out.lines()
                    .filter(|l| !l.starts_with('#'))
                    .collect::<String>()
            })
            .unwrap_or_else(|| "NA".into());
        assert_eq!(facts[fact], expected, "{fact}");
    }
}
